#!/usr/bin/env python3
"""The GPU H.264 encoder's figures on one machine, in one invocation:
the encoder alone at several stream counts, streams paced in real time,
exactness on the GPU (a dump decoded strictly against the encoder's own
reconstruction), and end to end against FFmpeg (the largest count of
1080p60 + 720p30 PiP takes each runner holds in real time). Prints a
Markdown summary, every figure beside the command that gave it: the
commands of bench/results/h200-gpu-encoder.md's "Where it stands".

    bench/gpu-encoder-figures.py --bin /tmp/diptych-server-linux-x86_64/bin --input bikes.nv12 --qp 26
    bench/gpu-encoder-figures.py --stages alone,exact --gpu software --size 320x176 --streams 1 --frames 12

Tools: `diptych-gpu-bench`, `diptych` and `ffmpeg` from --bin (default:
PATH). Without --input the pictures are 16 of FFmpeg's testsrc2 at --size.
"""
import argparse, hashlib, json, os, shutil, subprocess, sys, tempfile

STAGES = ("alone", "paced", "exact", "e2e")
RUNNERS = ("ffmpeg-nvdec", "ffmpeg", "diptych-serve", "diptych-serve-cpu", "diptych", "diptych-cpu")
DEFAULT_PAIRS = ["ffmpeg-nvdec=14,16,18,20", "diptych-serve=20,22,24,26", "diptych-serve-cpu=26,28,30,32"]


class BadInput(Exception):
    pass


def counts(text, what):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise BadInput(f"{what} {text!r}: not a comma-separated list of whole numbers")
    if not values or min(values) < 1:
        raise BadInput(f"{what} {text!r}: counts start at 1")
    return values


def options(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", help="folder holding diptych-gpu-bench, diptych and ffmpeg (default: PATH)")
    p.add_argument("--stages", default=",".join(STAGES), help="any of " + ",".join(STAGES) + " (default: all)")
    p.add_argument("--input", help="raw NV12 pictures of --size, tightly packed (default: testsrc2)")
    p.add_argument("--size", default="1920x1080")
    p.add_argument("--qp", type=int, default=26)
    p.add_argument("--slices", type=int, default=2)
    p.add_argument("--streams", default="1,8,16,64", help="stream counts of the encoder alone")
    p.add_argument("--runs", type=int, default=2, help="runs of each stream count, alternating (default 2)")
    p.add_argument("--frames", type=int, default=300, help="pictures a stream (default 300)")
    p.add_argument("--paced", default="32,64", help="stream counts paced at 60 fps")
    p.add_argument("--pairs", action="append", metavar="RUNNER=N,M,...",
                   help="end to end: the pair counts a runner tries (default: " + " ".join(DEFAULT_PAIRS) + ")")
    p.add_argument("--duration", type=int, default=15, help="seconds a take, end to end (default 15)")
    p.add_argument("--serve-decode-cores", type=int, help="end to end: the servers' --decode-cores (default: theirs)")
    p.add_argument("--serve-decode-nice", type=int, help="end to end: the servers' --decode-nice (default: theirs)")
    p.add_argument("--gpu", help="the GPU selection of diptych-gpu-bench (e.g. software)")
    p.add_argument("--work", help="folder for inputs and outputs (default: a new temporary one)")
    p.add_argument("--out", help="also write the summary here")
    a = p.parse_args(argv)
    a.stages = a.stages.split(",")
    for s in a.stages:
        if s not in STAGES:
            raise BadInput(f"--stages {s!r}: not one of {', '.join(STAGES)}")
    parts = a.size.split("x")
    if len(parts) != 2 or not all(x.isdigit() and int(x) >= 16 for x in parts):
        raise BadInput(f"--size {a.size!r}: not WIDTHxHEIGHT of at least 16x16")
    a.streams = counts(a.streams, "--streams")
    a.paced = counts(a.paced, "--paced")
    for name, v, low in (("--qp", a.qp, 0), ("--slices", a.slices, 1), ("--runs", a.runs, 1), ("--frames", a.frames, 1),
                         ("--duration", a.duration, 1)):
        if v < low or (name == "--qp" and v > 51):
            raise BadInput(f"{name} {v}: out of range")
    a.pairs_by_runner = []
    for item in a.pairs or DEFAULT_PAIRS:
        runner, _, values = item.partition("=")
        if runner not in RUNNERS:
            raise BadInput(f"--pairs {item!r}: no runner {runner!r} (one of {', '.join(RUNNERS)})")
        a.pairs_by_runner.append((runner, counts(values, f"--pairs {runner}")))
    if a.input and not os.path.isfile(a.input):
        raise BadInput(f"--input {a.input}: no such file")
    if a.out and not os.path.isdir(os.path.dirname(os.path.abspath(a.out))):
        raise BadInput(f"--out {a.out}: its folder does not exist")
    return a


def tool(a, name):
    path = os.path.join(a.bin, name) if a.bin else shutil.which(name)
    if not path or not os.access(path, os.X_OK):
        raise BadInput(f"{name}: not found" + (f" in --bin {a.bin}" if a.bin else " on PATH"))
    return path


def shown(cmd):
    return " ".join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd))


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{shown(cmd)}: exit {r.returncode}: {tail[0]}")
    return r


def encode_cmd(a, bench, pictures, streams, frames, *extra):
    """diptych-gpu-bench --encode on `pictures` with the run's settings."""
    cmd = [bench, "--encode", "--input", pictures, "--size", a.size, "--qp", str(a.qp), "--slices", str(a.slices)]
    return cmd + (["--gpu", a.gpu] if a.gpu else []) + ["--streams", str(streams), "--frames", str(frames), *extra]


def encode_runs(a, bench, pictures, work, counts, runs, *extra):
    """Each stream count's JSON results, `runs` rounds alternating over the counts."""
    out = os.path.join(work, "encode.json")
    rows = {}
    for _ in range(runs):
        for s in counts:
            run(encode_cmd(a, bench, pictures, s, a.frames, *extra, "--json", out))
            with open(out) as f:
                rows.setdefault(s, []).append(json.load(f))
    return rows


def alone(a, bench, pictures, work, lines):
    rows = encode_runs(a, bench, pictures, work, a.streams, a.runs)
    lines += ["## The encoder alone", "", "    " + shown(encode_cmd(a, bench, os.path.basename(pictures), "S", a.frames)), "",
              "| streams | pictures/s (each run) | bytes a picture |", "|---|---|---|"]
    for s, js in rows.items():
        rates = " · ".join(f"{j['picturesPerSecond']:,.0f}" for j in js)
        lines.append(f"| {s} | {rates} | {js[0]['bytesPerPicture']:,.0f} |")
    lines += ["", f"Renderer: {next(iter(rows.values()))[0]['renderer']}.", ""]


def paced(a, bench, pictures, work, lines):
    rows = encode_runs(a, bench, pictures, work, a.paced, 1, "--pace", "60")
    lines += ["## Streams paced at 60 fps", "",
              "    " + shown(encode_cmd(a, bench, os.path.basename(pictures), "S", a.frames, "--pace", "60")), "",
              "| streams | pictures/s asked | pictures/s | p50 ms | p99 ms |", "|---|---|---|---|---|"]
    for s, (j,) in rows.items():
        lines.append(f"| {s} | {60 * s:,} | {j['picturesPerSecond']:,.0f} | {j['latencyP50Ms']:.1f} | {j['latencyP99Ms']:.1f} |")
    lines += ["", f"Renderer: {next(iter(rows.values()))[0]['renderer']}.", ""]


def exact(a, bench, ffmpeg, pictures, work, lines):
    dump = os.path.join(work, "dump")
    streams = min(16, max(a.streams))
    run(encode_cmd(a, bench, pictures, streams, 16, "--dump", dump))
    decode = [ffmpeg, "-v", "error", "-xerror", "-err_detect", "+bitstream+buffer+explode",
              "-i", "DIR/stream0.h264", "-f", "rawvideo", "-pix_fmt", "nv12", "-"]
    decoded = subprocess.run([c.replace("DIR", dump) if c.startswith("DIR/") else c for c in decode], capture_output=True)
    with open(os.path.join(dump, "recon0.nv12"), "rb") as f:
        recon = f.read()
    same = decoded.returncode == 0 and not decoded.stderr and decoded.stdout == recon
    digest = hashlib.md5(recon).hexdigest()[:8]
    lines += ["## Exact", "", "    " + shown(encode_cmd(a, bench, os.path.basename(pictures), streams, 16, "--dump", "DIR")),
              "    " + shown(decode) + " | cmp - DIR/recon0.nv12", "",
              f"Stream 0 of {streams}, 16 pictures: " + (f"decoded strictly to the reconstruction, byte for byte ({len(recon):,} bytes, MD5 {digest})."
              if same else f"**differs** from the reconstruction (decoder exit {decoded.returncode}, {len(decoded.stdout):,} bytes against {len(recon):,}; "
              f"{decoded.stderr.decode(errors='replace').strip()[:200]})"), ""]
    return same


def decode_placement(work, runner, pairs):
    """How a serve trial placed its takes' decoding, from the files the benchmark keeps."""
    base = os.path.join(work, "e2e", f"{runner}-ultrafast-{pairs}")
    try:
        with open(base + "-takes.json") as f:
            takes = json.load(f)["takes"]
        with open(base + "-metrics.txt") as f:
            metrics = dict(l.split()[:2] for l in f if l.startswith("diptych_") and len(l.split()) >= 2)
    except (OSError, ValueError, KeyError) as e:
        return f"not kept ({e})"
    try:
        with open(base + ".log", errors="replace") as f:
            refused = [l.strip() for l in f if "refused a take" in l]
    except OSError:
        refused = []
    where = [str((t.get("cost") or {}).get("decodePlacement", "")) for t in takes]
    placed, nvdec = sum(w.startswith("cpu (") for w in where), sum(w.startswith("as asked (") for w in where)
    moved = sum("moved from NVDEC" in w for w in where)
    figure = float(metrics.get("diptych_cost_decode_cpu_seconds_per_megapixel", "nan"))
    budget = float(metrics.get("diptych_decode_budget_cpu_cores", "nan"))
    return (f"{placed} of {len(takes)} takes decoded on the CPU by placement ({moved} of them moved there from NVDEC while they ran), "
            f"{nvdec} left to NVDEC; "
            f"decode figure {figure:.4f} CPU s a megapixel, budget {budget:.0f} cores"
            + (f"; {len(refused)} POSTs refused, the first: {refused[0][:160]}" if refused else ""))


def end_to_end(a, diptych, work, lines):
    lines += ["## End to end (1080p60 + 720p30 PiP, NVDEC in where the GPU has it)", "",
              "| runner | real-time pairs | trials (pairs: slowest ×) | CPU s a frame there | command |", "|---|---|---|---|---|"]
    env = dict(os.environ, PATH=os.path.dirname(diptych) + os.pathsep + os.environ.get("PATH", ""))
    best, failed, placement = {}, [], []
    for runner, pairs in a.pairs_by_runner:
        out = os.path.join(work, f"e2e-{runner}.json")
        cmd = [diptych, "bench", "--duration", str(a.duration), "--preset", "ultrafast", "--stages", "e2e",
               "--pairs", ",".join(map(str, pairs)), "--pair-runners", runner, "--chart", "none", "--sheet", "none"]
        cmd += ["--slices", str(a.slices)] if runner.startswith("diptych") else []
        if a.serve_decode_cores is not None and runner.startswith("diptych-serve"):
            cmd += ["--serve-decode-cores", str(a.serve_decode_cores)]
        if a.serve_decode_nice is not None and runner.startswith("diptych-serve"):
            cmd += ["--serve-decode-nice", str(a.serve_decode_nice)]
        run(cmd + ["--work-dir", os.path.join(work, "e2e"), "--json", out], cwd=work, env=env)
        with open(out) as f:
            c = next((c for c in json.load(f)["concurrency"] if c["runner"] == runner), {})
        if "maxRealtimePairs" not in c:
            note = c.get("note", "not run").replace("|", "/")[:160]
            lines.append(f"| {runner} | {note} | | | `{shown(cmd)}` |")
            continue
        trials = ", ".join(f"{t['pairs']}: " + (f"{t['slowest']:.2f}" if t.get("slowest") is not None else "failed")
                           + ("" if t["realtime"] else " ✗") for t in c["trials"])
        if runner == "diptych-serve":
            placement += [f"- {t['pairs']} pairs: {decode_placement(work, runner, t['pairs'])}" for t in c["trials"]]
        there = [t for t in c["trials"] if t["pairs"] == c["maxRealtimePairs"]]
        cpu = f"{there[0]['cpuSecondsPerFrame']:.4f}" if there else "–"
        best[runner] = c["maxRealtimePairs"]
        lines.append(f"| {runner} | **{c['maxRealtimePairs']}** | {trials} | {cpu} | `{shown(cmd)}` |")
        failed += [f"- {runner}, {t['pairs']} pairs: " + "; ".join(t.get("notes") or ["no note"]).replace("\n", " ")[:300]
                   for t in c["trials"] if t.get("slowest") is None]
    peer = max((v for k, v in best.items() if k.startswith("ffmpeg")), default=0)
    lines.append("")
    if failed:
        lines += ["Trials that did not finish:", ""] + failed + [""]
    if placement:
        lines += ["Where diptych-serve decoded (`cost.decodePlacement` of its takes, and its `/metrics` at the end):", ""] + placement + [""]
    if peer > 0:
        lines += [f"- {k}: {v / peer:.2f}× FFmpeg's best ({peer})." for k, v in best.items() if not k.startswith("ffmpeg")]
        lines.append("")


def main(argv):
    try:
        a = options(argv)
        bench = tool(a, "diptych-gpu-bench") if set(a.stages) & {"alone", "paced", "exact"} else None
        ffmpeg = tool(a, "ffmpeg")
        diptych = tool(a, "diptych") if "e2e" in a.stages else None
    except BadInput as e:
        print(f"gpu-encoder-figures: {e}", file=sys.stderr)
        return 2
    work = a.work or tempfile.mkdtemp(prefix="gpu-encoder-figures-")
    os.makedirs(work, exist_ok=True)
    lines = ["# The GPU H.264 encoder's figures", ""]
    try:
        machine = run(["nvidia-smi", "-L"]).stdout.strip() if shutil.which("nvidia-smi") else "no nvidia-smi"
        lines += [f"Machine: {os.cpu_count()} cores; {machine}.", ""]
        pictures = os.path.abspath(a.input) if a.input else os.path.join(work, "testsrc2.nv12")
        if not a.input and bench:
            run([ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size={a.size}:rate=60", "-frames:v", "16",
                 "-pix_fmt", "nv12", "-f", "rawvideo", pictures])
        if bench:
            lines += [f"Pictures: {a.input or 'testsrc2 (16 pictures)'} at {a.size}, QP {a.qp}, {a.slices} slices.", ""]
        ok = True
        if "alone" in a.stages:
            alone(a, bench, pictures, work, lines)
        if "paced" in a.stages:
            paced(a, bench, pictures, work, lines)
        if "exact" in a.stages:
            ok = exact(a, bench, ffmpeg, pictures, work, lines)
        if "e2e" in a.stages:
            end_to_end(a, diptych, work, lines)
    except RuntimeError as e:
        print(f"gpu-encoder-figures: {e}", file=sys.stderr)
        return 1
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
