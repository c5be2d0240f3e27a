#!/usr/bin/env python3
"""How many 720p30 PiP takes one `diptych serve` holds in real time, against
the same number of `diptych record` processes, on this machine.

For each N, in the same invocation and alternating:
  serve:  one `diptych serve` process; N takes POSTed at once over HTTP.
  record: N `diptych record` processes started at once.
Every take composites the same two H.264 files (made once with the ffmpeg CLI:
a 1280x720 30 fps primary and a 640x360 30 fps secondary, PiP), encodes with
libx264 into fragmented MP4 for --duration seconds. Sources are files, so a
take runs as fast as it can; a set of N takes is "held in real time" when
every take's realtime factor (media seconds / wall seconds, from its summary)
is at least 1. CPU time and peak memory come from wait4() of the processes.
The server runs with --cores and --gpu-ms set high so admission does not refuse the
takes being measured; its own admission estimate is reported beside.

usage: bench/serve-capacity.py [--diptych .build/release/diptych] [--max-takes 6]
                               [--duration 10] [--preset ultrafast] [--out bench/results/serve-llvmpipe]
"""
import argparse, json, os, re, signal, subprocess, sys, tempfile, threading, time, urllib.request

def wait4(proc):
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ru

def proc_cpu(pid):
    """utime + stime of a running process, seconds (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def make_inputs(work, duration):
    prim, sec = os.path.join(work, "primary-720p30.mp4"), os.path.join(work, "secondary-360p30.mp4")
    for path, size, src in [(prim, "1280x720", "testsrc2"), (sec, "640x360", "testsrc")]:
        if not os.path.exists(path):
            subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"{src}=size={size}:rate=30",
                            "-t", str(duration + 1), "-c:v", "libx264", "-preset", "ultrafast", "-g", "30",
                            "-pix_fmt", "yuv420p", path], check=True)
    return prim, sec

def take_args(prim, sec, out, a):
    return ["--primary", prim, "--secondary", sec, "--layout", "pip", "--out", out, "--duration", str(a.duration),
            "--preset", a.preset, "--audio", "none", "--gpu", a.gpu]

def run_record(n, prim, sec, work, a):
    cmds = [[a.diptych, "record"] + take_args(prim, sec, os.path.join(work, f"record-{n}-{i}.mp4"), a) + ["--json"]
            for i in range(n)]
    t0 = time.monotonic()
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for c in cmds]
    outs, cpu, rss = [], 0.0, 0
    for p in procs:
        ru = wait4(p)
        outs.append(json.loads(p.stdout.read()))
        cpu += ru.ru_utime + ru.ru_stime
        rss += ru.ru_maxrss
    wall = time.monotonic() - t0
    return {"mode": "record", "takes": n, "wall_s": wall, "cpu_s": cpu, "peak_rss_mib": rss / 1024,
            "rtf": [o["realtimeFactor"] for o in outs], "frames": [o["frames"] for o in outs],
            "command": " ".join(cmds[0]) + (f"   (x{n}, at once)" if n > 1 else "")}

def http(port, method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())

def run_serve(n, prim, sec, work, a, contexts):
    cmd = [a.diptych, "serve", "--listen", "127.0.0.1:0", "--gpu", a.gpu, "--cores", "1000", "--gpu-ms", "1000000",
           "--max-takes", str(n)] + (["--contexts", str(contexts)] if contexts else [])
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(os.path.join(work, f"serve-{n}.log"), "w"), text=True)
    line = srv.stdout.readline()
    m = re.search(r":(\d+)$", line.strip())
    if not m:
        srv.wait()
        sys.exit(f"diptych serve did not start: {open(os.path.join(work, f'serve-{n}.log')).read()[-2000:]}")
    port = int(m.group(1))
    bodies = [{"primary": prim, "secondary": sec, "layout": {"kind": "pip"}, "out": os.path.join(work, f"serve-{n}-{i}.mp4"),
               "duration": a.duration, "preset": a.preset, "audio": "none"} for i in range(n)]
    ids, errors = [None] * n, []
    def post(i):
        status, body = http(port, "POST", "/v1/takes", bodies[i])
        if status == 201: ids[i] = body["id"]
        else: errors.append(f"{status} {body}")
    t0, cpu0 = time.monotonic(), proc_cpu(srv.pid)
    threads = [threading.Thread(target=post, args=(i,)) for i in range(n)]
    for t in threads: t.start()
    for t in threads: t.join()
    views = []
    for i in ids:
        while i:
            _, v = http(port, "GET", f"/v1/takes/{i}")
            if v["state"] in ("finished", "failed"): views.append(v); break
            time.sleep(0.05)
    wall, cpu = time.monotonic() - t0, proc_cpu(srv.pid) - cpu0
    estimate = views[0]["cost"]["cpuCores"] if views else None
    _, health = http(port, "GET", "/healthz")
    srv.send_signal(signal.SIGTERM)
    ru = wait4(srv)
    failed = [v["error"] for v in views if v["state"] != "finished"]
    # CPU while the takes ran (a long-running server's start-up, GPU and calibration, is not per take).
    return {"mode": f"serve ({contexts} context{'s' if contexts > 1 else ''})" if contexts else "serve", "takes": n, "wall_s": wall, "cpu_s": cpu, "cpu_s_with_startup": ru.ru_utime + ru.ru_stime,
            "peak_rss_mib": ru.ru_maxrss / 1024, "rtf": [v["summary"]["realtimeFactor"] for v in views if v.get("summary")],
            "frames": [v["frames"] for v in views], "errors": errors + failed,
            "admission_estimate_cpu_cores_per_take": estimate, "cost_model": health["cost"],
            "command": " ".join(cmd) + f"; POST /v1/takes x{n} at once: " + json.dumps(bodies[0])}

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--diptych", default=".build/release/diptych")
    p.add_argument("--max-takes", type=int, default=6)
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--preset", default="ultrafast")
    p.add_argument("--out", default="bench/results/serve-llvmpipe")
    p.add_argument("--contexts", default="", help="comma-separated --contexts values for the server (default: its own choice)")
    p.add_argument("--gpu", default="software", help="the takes' --gpu (software: Mesa llvmpipe; auto on a GPU server)")
    p.add_argument("--counts", default="", help="comma-separated take counts to try (default 1 to --max-takes)")
    a = p.parse_args()
    a.diptych = os.path.abspath(a.diptych)
    work = tempfile.mkdtemp(prefix="diptych-serve-bench-")
    load_before = os.getloadavg()
    prim, sec = make_inputs(work, a.duration)
    rows = []
    contexts = [int(c) for c in a.contexts.split(",") if c] or [None]
    counts = [int(c) for c in a.counts.split(",") if c] or list(range(1, a.max_takes + 1))
    a.max_takes = max(counts)
    for n in counts:
        runs = [lambda n, c=c: run_serve(n, prim, sec, work, a, c) for c in contexts] + [lambda n: run_record(n, prim, sec, work, a)]
        for run in runs:
            r = run(n)
            r["held_in_real_time"] = bool(r["rtf"]) and len(r["rtf"]) == n and min(r["rtf"]) >= 1.0
            rows.append(r)
            print(f"{r['mode']:6} N={n}: min rtf {min(r['rtf'] or [0]):.2f}, wall {r['wall_s']:.1f} s, "
                  f"CPU {r['cpu_s']:.1f} s, peak RSS {r['peak_rss_mib']:.0f} MiB", file=sys.stderr, flush=True)
        for f in os.listdir(work):
            if f.startswith(("serve-", "record-")): os.remove(os.path.join(work, f))
    machine = {"load_average_before": load_before, "load_average_after": os.getloadavg(), "cores": os.cpu_count(), "uname": " ".join(os.uname()), "duration_s": a.duration, "preset": a.preset,
               "inputs": "ffmpeg testsrc2 1280x720@30 and testsrc 640x360@30, libx264 ultrafast, GOP 30"}
    with open(a.out + ".json", "w") as f:
        json.dump({"machine": machine, "rows": rows}, f, indent=1)
    with open(a.out + ".md", "w") as f:
        f.write(f"# diptych serve vs diptych record: 720p30 PiP takes at once\n\n"
                f"Machine: {machine['cores']} cores, {'Mesa llvmpipe' if a.gpu == 'software' else 'GPU --gpu ' + a.gpu}, libx264 preset {a.preset}, {a.duration:g} s takes "
                f"(inputs: {machine['inputs']}). Load average (1/5/15 min) {'/'.join(f'{x:.1f}' for x in machine['load_average_before'])} before, "
                f"{'/'.join(f'{x:.1f}' for x in machine['load_average_after'])} after (other work on the machine shares its cores). "
                f"Command: `{' '.join(sys.argv)}`. "
                "CPU s: the server's CPU time while its takes ran (its start-up, GPU and calibration take excluded); "
                "the record processes' whole CPU time. Peak RSS: the server's, or the sum of the processes'.\n\n"
                "| N | mode | min realtime factor | held in real time | wall s | CPU s | CPU s / take | peak RSS MiB |\n"
                "|---|------|--------------------:|:-----------------:|-------:|------:|-------------:|-------------:|\n")
        for r in rows:
            f.write(f"| {r['takes']} | {r['mode']} | {min(r['rtf'] or [0]):.2f} | {'yes' if r['held_in_real_time'] else 'no'} "
                    f"| {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['cpu_s'] / r['takes']:.2f} | {r['peak_rss_mib']:.0f} |\n")
        modes = list(dict.fromkeys(r["mode"] for r in rows))
        held = {m: max([r["takes"] for r in rows if r["mode"] == m and r["held_in_real_time"]] or [0]) for m in modes}
        est = next((r["admission_estimate_cpu_cores_per_take"] for r in rows if r["mode"].startswith("serve")), None)
        f.write("\nHeld in real time (every take at 1x or more): " + ", ".join(f"{m} {held[m]}" for m in modes) + ".\n")
        if est:
            f.write(f"The server's admission estimate for one such take: {est:.2f} CPU cores "
                    f"(admits {int(machine['cores'] * 0.9 / est)} on {machine['cores']} cores at 90 %).\n")
        f.write("\nReading: every take of a set runs as fast as it can (file sources), so a set is held in real time "
                "when its slowest take still made 1 s of media per wall second. CPU s / take is the work per take, "
                "the same in both modes within noise; the server saves each process's start-up and shares one "
                "GL context (or a few) and the loaded libraries, hence its lower peak memory. The admission "
                "estimate counts the whole machine as the server's; where other work shares the cores (as during "
                "this run), `--cores` tells it how many it may fill.\n")
        f.write("\nCommands (first take of each set):\n\n")
        for r in rows:
            if r["takes"] == a.max_takes: f.write(f"- {r['mode']}: `{r['command']}`\n")
    print(f"wrote {a.out}.json and {a.out}.md", file=sys.stderr)

if __name__ == "__main__":
    main()
