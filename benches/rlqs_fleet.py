#!/usr/bin/env python3
"""RLQS fleet accuracy: 2, 10 and 50 simulated Envoys (server/tests/python/rlqs_fleet.py,
enforcing as Envoy's rate_limit_quota filter does) against two redlimit-server instances on
one redis-server, with Envoy's real 5 s report interval and skewed Poisson traffic (80/15/5 %
of three times the limit). In each run one Envoy is killed at a third of the run and server
instance A is restarted (SIGTERM, then a new process on the same port) at two thirds.

    cargo build --release -p redlimit-server
    REDLIMIT_SERVER_BIN=target/release/redlimit-server python3 benches/rlqs_fleet.py

Knobs: REDLIMIT_BENCH_FLEETS (2,10,50), REDLIMIT_BENCH_SECS (90 per fleet),
REDLIMIT_BENCH_LIMIT (1000 a second), REDLIMIT_BENCH_INTERVAL (5, Envoy's),
REDLIMIT_BENCH_RESTART (`term`: SIGTERM, a graceful stop; `kill`: SIGKILL, a crash),
REDLIMIT_BENCH_OUT (docs/bench: writes rlqs_fleet.csv and rlqs_fleet.svg there, or
rlqs_fleet_crash.* with `kill`, and prints the Markdown table for docs/bench/rlqs.md).
Needs xds-protos and grpcio (pip), redis-server.
"""

import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "server", "tests", "python"))

from harness import Redis, Server, free_port, wait_for  # noqa: E402
from rlqs_fleet import Fleet, skewed  # noqa: E402

TOLERANCE = 0.05


def env_list(name, default):
    return [int(x) for x in os.environ.get(name, default).split(",") if x]


def config(limit):
    return {"rlqs.yaml": f"""
domain: bench
descriptors:
  - key: tenant
    rate_limit: {{unit: second, requests_per_unit: {limit}}}
"""}


def victim(rates, limit):
    """The Envoy to kill: the busiest whose death leaves the others wanting at least 1.5
    times the limit (so that its share has somewhere to go)."""
    total = sum(rates)
    fit = [i for i, r in enumerate(rates) if total - r >= 1.5 * limit]
    return max(fit, key=lambda i: rates[i])


def start_server(redis, limit, port):
    env = {"GRPC_PORT": str(port)}
    return Server(config(limit), redis, env=env)


def run(count, secs, limit, interval):
    """One fleet of `count` Envoys: (rows [(second, admitted, denied)], events {name: t})."""
    redis = Redis()
    ports = [free_port(), free_port()]
    servers = [start_server(redis, limit, p) for p in ports]
    rates = skewed(3 * limit, count)
    fleet = Fleet([f"127.0.0.1:{p}" for p in ports], "bench", rates,
                  buckets=(({"tenant": "bench"}, 1.0),), interval=interval)
    events = {}
    try:
        fleet.start()
        kill_at, restart_at = secs / 3, 2 * secs / 3
        wait_for("the kill", lambda: fleet.elapsed() >= kill_at, deadline=secs + 60, every=0.1)
        doomed = victim(rates, limit)
        events["kill"] = fleet.call(lambda f, now: (f.envoys[doomed].kill(), now - f.t0)[1])
        wait_for("the restart", lambda: fleet.elapsed() >= restart_at, deadline=secs + 60,
                 every=0.1)
        events["restart"] = fleet.elapsed()
        if os.environ.get("REDLIMIT_BENCH_RESTART", "term") == "kill":
            servers[0].process.kill()
        else:
            servers[0].terminate()
        servers[0].process.wait(30)
        servers[0].stop()
        servers[0] = start_server(redis, limit, ports[0])
        events["restarted"] = fleet.elapsed()
        wait_for("the end", lambda: fleet.elapsed() >= secs, deadline=secs + 60, every=0.1)
        rows = fleet.admitted_per_second(last=int(secs))
        events["victim"] = doomed
        events["victim_rate"] = rates[doomed]
        events["streams"] = sum(e.streams_opened for e in fleet.envoys)
    finally:
        fleet.stop()
        for server in servers:
            server.stop()
        redis.stop()
    return rows, events


def summarize(count, rows, events, limit, interval):
    """The table's row: steady seconds (from two intervals in until the restart, but for the
    two intervals after the kill), and the seconds outside the tolerance after the kill (until
    the restart) and in the six intervals after the restart."""
    def window(start, length):
        return range(math.floor(start), math.ceil(start + length))

    after_kill = set(window(events["kill"], 2 * interval))
    # The kill's seconds until the restart; the restart's, six intervals.
    after_kill_all = set(range(math.floor(events["kill"]), math.floor(events["restart"])))
    after_restart = set(window(events["restart"], 6 * interval))
    steady = [(s, a) for s, a, _ in rows
              if 2 * interval <= s < math.floor(events["restart"]) and s not in after_kill]
    dev = [abs(a - limit) / limit for _, a in steady]
    outside = [s for s, a in steady if abs(a - limit) > TOLERANCE * limit]
    admitted = [a for _, a in steady]

    def worst(seconds):
        picked = [a for s, a, _ in rows if s in seconds]
        return max(picked, key=lambda a: abs(a - limit)) if picked else None

    return {
        "kill_outside": [s for s, a, _ in rows if s in after_kill_all
                         and abs(a - limit) > TOLERANCE * limit],
        "envoys": count, "steady_seconds": len(steady),
        "mean": sum(admitted) / len(admitted) if admitted else float("nan"),
        "min": min(admitted, default=0), "max": max(admitted, default=0),
        "worst_dev": max(dev, default=float("nan")), "outside": outside,
        "kill_worst": worst(after_kill_all), "restart_worst": worst(after_restart),
        "restart_outside": [s for s, a, _ in rows
                            if s in after_restart and abs(a - limit) > TOLERANCE * limit],
    }


def write_csv(path, runs, limit):
    with open(path, "w") as f:
        f.write("envoys,second,admitted,denied,limit,event\n")
        for count, rows, events in runs:
            marks = {int(events["kill"]): "kill", int(events["restart"]): "restart"}
            for s, a, d in rows:
                f.write(f"{count},{s},{a},{d},{limit},{marks.get(s, '')}\n")


def write_svg(path, runs, limit, interval, crash=False):
    """One panel per fleet: admitted per second (line), the limit and its +-5 % band, the
    kill and the restart (dashed)."""
    width, panel_h, left, top = 900, 220, 60, 30
    height = top + len(runs) * (panel_h + 40)
    top_value = max(limit * 1.6, max((a for _, rows, _ in runs for _, a, _ in rows), default=0))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="#fff"/>',
           f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">RLQS: fleet '
           f'admitted per second against the limit ({limit}/s, band ±5 %), two servers on one '
           f'Redis, Envoy report interval {interval:g} s</text>']
    plot_w = width - left - 20
    for i, (count, rows, events) in enumerate(runs):
        y0 = top + i * (panel_h + 40) + 10
        secs = max(s for s, _, _ in rows) + 1

        def x(s):
            return left + plot_w * s / secs

        def y(v):
            return y0 + panel_h - panel_h * min(v, top_value) / top_value

        out.append(f'<rect x="{left}" y="{y0}" width="{plot_w}" height="{panel_h}" '
                   f'fill="none" stroke="#999"/>')
        out.append(f'<rect x="{left}" y="{y(limit * 1.05):.1f}" width="{plot_w}" '
                   f'height="{y(limit * 0.95) - y(limit * 1.05):.1f}" fill="#2a7" '
                   f'opacity="0.15"/>')
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(limit):.1f}" '
                   f'y2="{y(limit):.1f}" stroke="#2a7"/>')
        for v in (0, limit, 2 * limit):
            if v <= top_value:
                out.append(f'<text x="{left - 5}" y="{y(v) + 4:.1f}" text-anchor="end">{v}</text>')
        for s in range(0, secs + 1, 10):
            out.append(f'<text x="{x(s):.1f}" y="{y0 + panel_h + 14}" '
                       f'text-anchor="middle">{s}</text>')
        for name in ("kill", "restart"):
            t = events[name]
            out.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{y0}" y2="{y0 + panel_h}" '
                       f'stroke="#c33" stroke-dasharray="4 3"/>')
            label = ("Envoy killed" if name == "kill" else
                     "server A crashed, restarted" if crash else "server A stopped, restarted")
            out.append(f'<text x="{x(t) + 4:.1f}" y="{y0 + 12}" fill="#c33">{label}</text>')
        points = " ".join(f"{x(s + 0.5):.1f},{y(a):.1f}" for s, a, _ in rows)
        out.append(f'<polyline points="{points}" fill="none" stroke="#236" stroke-width="1.5"/>')
        out.append(f'<text x="{left + 6}" y="{y0 + panel_h - 6}">{count} Envoys</text>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle">'
               'seconds</text></svg>')
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    fleets = env_list("REDLIMIT_BENCH_FLEETS", "2,10,50")
    secs = float(os.environ.get("REDLIMIT_BENCH_SECS", "90"))
    limit = int(os.environ.get("REDLIMIT_BENCH_LIMIT", "1000"))
    interval = float(os.environ.get("REDLIMIT_BENCH_INTERVAL", "5"))
    out_dir = os.environ.get("REDLIMIT_BENCH_OUT", os.path.join(ROOT, "docs", "bench"))
    if "REDLIMIT_SERVER_BIN" not in os.environ:
        os.environ["REDLIMIT_SERVER_BIN"] = os.path.join(ROOT, "target", "release",
                                                         "redlimit-server")
    crash = os.environ.get("REDLIMIT_BENCH_RESTART", "term") == "kill"
    runs, table = [], []
    for count in fleets:
        started = time.monotonic()
        rows, events = run(count, secs, limit, interval)
        runs.append((count, rows, events))
        summary = summarize(count, rows, events, limit, interval)
        table.append(summary)
        print(f"{count} Envoys: {time.monotonic() - started:.0f} s, {summary}", file=sys.stderr)
    name = "rlqs_fleet_crash" if crash else "rlqs_fleet"
    write_csv(os.path.join(out_dir, f"{name}.csv"), runs, limit)
    write_svg(os.path.join(out_dir, f"{name}.svg"), runs, limit, interval, crash)
    print("| Envoys | steady seconds | mean admitted/s | min | max | worst deviation | steady "
          "seconds outside ±5 % | seconds outside ±5 % after the kill | worst second | seconds "
          "outside ±5 % in 6 intervals after the restart | worst second |")
    print("|---:|---:|---:|---:|---:|---:|---|---|---:|---|---:|")
    for r in table:
        print(f"| {r['envoys']} | {r['steady_seconds']} | {r['mean']:.1f} | {r['min']} | "
              f"{r['max']} | {r['worst_dev']:.1%} | {seconds(r['outside'])} | "
              f"{seconds(r['kill_outside'])} | {r['kill_worst']} | "
              f"{seconds(r['restart_outside'])} | {r['restart_worst']} |")


def seconds(values):
    return ", ".join(map(str, values)) or "none"


if __name__ == "__main__":
    main()
