"""Draws a Grafana dashboard's panels as one SVG picture from Prometheus
range queries (the same expressions the panels hold), with the standard
library only: test_dashboard_prom.py writes it after a run, and the
README's picture is one such file.

    svg = render(dashboard_json, lambda expr: [(labels, [(t, v), ...]), ...],
                 subst=lambda expr: expr)
"""

import html
import math
import re

COL = 46          # pixels per grid column (24 columns)
ROW = 34          # pixels per grid row
PAD = 6
COLORS = ["#3274d9", "#56a64b", "#e0b400", "#e02f44", "#8f3bb8", "#ff7f00",
          "#1f9e89", "#b877d9", "#9d6b3b", "#5f6b7a"]


def _fmt(v, unit):
    if v is None or math.isnan(v):
        return "-"
    if unit in ("bytes", "Bps"):
        for suffix in ("B", "KiB", "MiB", "GiB", "TiB"):
            if abs(v) < 1024 or suffix == "TiB":
                s = "%.3g %s" % (v, suffix)
                break
            v /= 1024.0
        return s + ("/s" if unit == "Bps" else "")
    if unit == "s":
        return "%.3g s" % v if v >= 0.01 or v == 0 else "%.3g ms" % (v * 1e3)
    if unit == "percentunit":
        return "%.3g%%" % (v * 100)
    if unit == "reqps":
        return "%.3g/s" % v
    return "%.4g" % v


def _legend(fmt, labels):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""),
                  fmt or "").strip() or "value"


def render(dash, query_range, subst=lambda e: e):
    """query_range(expr) -> [(labels dict, [(t, value), ...])]."""
    panels = [p for p in dash["panels"]]
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels) * ROW
    width = 24 * COL
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (width, height),
           '<rect width="100%" height="100%" fill="#111217"/>']
    for p in panels:
        g = p["gridPos"]
        x, y = g["x"] * COL + PAD / 2, g["y"] * ROW + PAD / 2
        w, h = g["w"] * COL - PAD, g["h"] * ROW - PAD
        if p["type"] == "row":
            out.append('<text x="%d" y="%d" fill="#ccccdc" font-size="14" '
                       'font-weight="bold">%s</text>'
                       % (x, y + 20, html.escape(p["title"])))
            continue
        out.append('<rect x="%d" y="%d" width="%d" height="%d" rx="3" '
                   'fill="#181b1f" stroke="#2c3235"/>' % (x, y, w, h))
        out.append('<text x="%d" y="%d" fill="#ccccdc" font-weight="bold">'
                   '%s</text>' % (x + 8, y + 16, html.escape(p["title"])))
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        series = []
        for t in p.get("targets", []):
            for labels, points in query_range(subst(t["expr"])):
                pts = [(ts, v) for ts, v in points if not math.isnan(v)]
                if pts:
                    series.append((_legend(t.get("legendFormat"), labels), pts))
        if p["type"] == "stat":
            last = series[0][1][-1][1] if series else None
            out.append('<text x="%d" y="%d" fill="#73bf69" font-size="28" '
                       'text-anchor="middle">%s</text>'
                       % (x + w / 2, y + h / 2 + 16,
                          html.escape(_fmt(last, unit))))
            continue
        series = series[:len(COLORS)]
        legend_h = 14 * min(len(series), 4)
        px, py, pw, ph = x + 56, y + 26, w - 66, h - 40 - legend_h
        vals = [v for _, pts in series for _, v in pts] or [0.0]
        times = [t for _, pts in series for t, _ in pts] or [0.0, 1.0]
        lo, hi = min(0.0, min(vals)), max(vals)
        hi = hi if hi > lo else lo + 1
        t0, t1 = min(times), max(times)
        t1 = t1 if t1 > t0 else t0 + 1
        for k in range(3):
            v = lo + (hi - lo) * k / 2
            yy = py + ph - ph * k / 2
            out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" '
                       'stroke="#2c3235"/>' % (px, yy, px + pw, yy))
            out.append('<text x="%d" y="%.1f" fill="#8e8e8e" '
                       'text-anchor="end">%s</text>'
                       % (px - 4, yy + 4, html.escape(_fmt(v, unit))))
        for i, (name, pts) in enumerate(series):
            coords = " ".join("%.1f,%.1f" % (px + pw * (t - t0) / (t1 - t0),
                                             py + ph - ph * (v - lo) / (hi - lo))
                              for t, v in pts)
            if len(pts) == 1:
                cx, cy = coords.split(",")
                out.append('<circle cx="%s" cy="%s" r="2" fill="%s"/>'
                           % (cx, cy, COLORS[i]))
            out.append('<polyline points="%s" fill="none" stroke="%s" '
                       'stroke-width="1.5"/>' % (coords, COLORS[i]))
            if i < 4:
                ly = py + ph + 16 + 14 * i
                out.append('<rect x="%d" y="%d" width="10" height="3" '
                           'fill="%s"/>' % (px, ly - 4, COLORS[i]))
                out.append('<text x="%d" y="%d" fill="#ccccdc">%s  %s</text>'
                           % (px + 14, ly, html.escape(name[:60]),
                              html.escape(_fmt(pts[-1][1], unit))))
    out.append("</svg>")
    return "\n".join(out) + "\n"
