/*
 * mirrorstatus.h: /mirrors and /mirrors/<name>/ready on the metrics
 * listener (see mirrorstatus.c).
 */
#ifndef MIRRORD_MIRRORSTATUS_H
#define MIRRORD_MIRRORSTATUS_H

struct evbuffer;

/* An httpd route (httpd_add_route() on "/mirrors"); arg is a struct
 * admin ** (NULL while the admin plane is not up yet: 503). */
int mstatus_route(void *arg, const char *path, const char *query,
    struct evbuffer *out, const char **content_type);

#endif
