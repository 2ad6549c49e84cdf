/*
 * usercmd.h: `mirrord --add-user/--delete-user/--list-users`, the
 * management command of the admin listener's SCRAM credential store
 * (lib/credstore, server.sasl.credentials_file).  Passwords are read from
 * the terminal (echo off) or one line of standard input, never from argv.
 */
#ifndef MIRRORD_USERCMD_H
#define MIRRORD_USERCMD_H

enum usercmd_action { USERCMD_ADD, USERCMD_DELETE, USERCMD_LIST };

struct usercmd {
	enum usercmd_action action;
	const char *user;        /* --add-user/--delete-user NAME */
	const char *mechanism;   /* NULL: SCRAM-SHA-512 (add), all (delete) */
	int iterations;          /* 0: 4096 */
	const char *file;        /* --credentials-file, or NULL */
	const char *config_path; /* for server.sasl.credentials_file */
};

/* Runs the command; returns the exit status (0 ok, 1 failed, 2 usage). */
int usercmd_run(const struct usercmd *uc);

#endif
