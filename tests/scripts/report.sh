#!/bin/bash
# dlh-report (issue 16) on real runs of dlh-launch (2 ranks under mpirun):
#   - the report of a run stopped by --max-steps and resumed: every section, both attempts,
#     the resume on the time axis, the checkpoints;
#   - every kind of damaged input gets a report that says what it could not read, or one
#     line and exit code 2, never a crash: a torn last line, a foreign line, binary junk,
#     an unreadable summary.json, an empty folder, no folder, a bad option;
#   - a running job: --follow prints its headline until it ends, --watch rewrites the page
#     (reloading itself while the run goes on, not once it ended), --serve answers GET /
#     with the report as it is now.
source "$(dirname "$0")/common.bash"

dlh-data synthetic --out "$WORK/data.h5" --shape 1x12x12 --classes 4 --train 1200 --test 120 --seed 5 >/dev/null
spec() {  # spec EPOCHS
  cat <<JSON
{
  "name": "reporttest",
  "input": {"channels": 1, "height": 12, "width": 12},
  "classes": 4,
  "layers": [{"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1}, {"type": "relu"},
             {"type": "flatten"}, {"type": "dense", "units": 4}],
  "optimizer": {"type": "sgd", "lr": 0.02, "momentum": 0.9},
  "batch_size": 24, "epochs": $1, "seed": 2, "dataset": "$WORK/data.h5"
}
JSON
}
spec 3 >"$WORK/spec.json"
train() {  # train SPEC RUN_DIR [options]
  local s=$1 dir=$2; shift 2
  mpirun -np 2 dlh-launch train "$s" --run-dir "$dir" --threads 1 --progress none \
    --checkpoint-steps 20 "$@" >>"$WORK/train.log" 2>&1 || { cat "$WORK/train.log" >&2; fail "training failed"; }
}

echo "a run stopped at step 70 and resumed to its end (150 steps)"
run=$WORK/run
train "$WORK/spec.json" "$run" --max-steps 70
train "$WORK/spec.json" "$run"
dlh-report "$run" >"$WORK/out.txt" 2>"$WORK/err.txt" || { cat "$WORK/err.txt"; fail "dlh-report failed"; }
grep -q "wrote $run/report.html (finished, step 150)" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "no summary line"; }
[[ ! -s $WORK/err.txt ]] || { cat "$WORK/err.txt"; fail "notes about a sound run"; }
python3 - "$run/report.html" <<'PY' || fail "the report misses something (above)"
import html as markup, re, sys
html = open(sys.argv[1]).read()
charts = re.findall(r'<svg class="dlh-chart" data-points="(\d+)"', html)
titles = [markup.unescape(t) for t in re.findall(r'<svg class="dlh-chart"[^>]*>\n<title>([^<]*)</title>', html)]
need = ["Training loss", "Accuracy", "Samples per second", "Where a step's time goes (rank 0)",
        "Each rank's mean step (last attempt)", "Steps over time: attempts, checkpoints, signals, resumes",
        "Checkpoint write time"]
missing = [t for t in need if t not in titles]
if missing: sys.exit(f"charts missing: {missing} (have {titles})")
if any(int(n) == 0 for n in charts): sys.exit(f"a chart without data: {list(zip(titles, charts))}")
for text in ["attempt 1", "attempt 2", "resumed from", "finished", "test accuracy", "ckpt-000000150.h5",
             "The plan against what happened", "<!DOCTYPE html>"]:
    if text not in html: sys.exit(f"no '{text}' in the report")
if "http-equiv=\"refresh\"" in html: sys.exit("a finished run's page reloads itself")
if re.search(r"<script|https?://(?!www\.w3\.org/2000/svg)", html): sys.exit("the page loads a script or fetches something")
print(f"  ok: {len(charts)} charts, each with data: {', '.join(titles)}")
PY
check "the report of a resumed run: both attempts and the resume are on it"

echo "damaged or partial input"
damaged() {  # damaged NAME: a copy of the run to damage
  rm -rf "$WORK/$1" && cp -r "$run" "$WORK/$1" && rm -f "$WORK/$1/report.html" && echo "$WORK/$1"
}
d=$(damaged torn)
printf '{"step": 151, "epoch": 4, "loss": 0.1, "accu' >>"$d/metrics.jsonl"
dlh-report "$d" >/dev/null 2>"$WORK/err.txt" || fail "torn last line: dlh-report failed"
grep -q "metrics.jsonl line [0-9]*: an incomplete last line" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "torn last line: not named"; }
grep -q "an incomplete last line" "$d/report.html" || fail "torn last line: the page does not say"
check "torn last line: $(head -1 "$WORK/err.txt")"
d=$(damaged foreign)
sed -i '40s/.*/this is not JSON/; 41s/.*/{"what": "a foreign record"}/' "$d/metrics.jsonl"
dlh-report "$d" >/dev/null 2>"$WORK/err.txt" || fail "foreign lines: dlh-report failed"
[[ $(grep -c "metrics.jsonl line 4[01]" "$WORK/err.txt") -eq 2 ]] || { cat "$WORK/err.txt"; fail "foreign lines: not both named"; }
check "foreign lines: $(tr '\n' ';' <"$WORK/err.txt")"
d=$(damaged junk)
head -c 200000 /dev/urandom >"$d/metrics.jsonl"
echo '{"finished": tr' >"$d/summary.json"
dlh-report "$d" >/dev/null 2>"$WORK/err.txt" || fail "binary junk: dlh-report failed"
grep -q "summary.json: not a JSON object" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "damaged summary.json: not named"; }
grep -q "more lines skipped\|metrics.jsonl line" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "junk metrics: not named"; }
check "junk metrics.jsonl and a damaged summary.json: a report that says so ($(wc -l <"$WORK/err.txt") notes)"
d=$(damaged nometrics)
rm "$d/metrics.jsonl"
dlh-report "$d" >/dev/null 2>"$WORK/err.txt" || fail "no metrics.jsonl: dlh-report failed"
grep -q "metrics.jsonl: missing" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "missing metrics.jsonl: not named"; }
check "no metrics.jsonl: $(head -1 "$WORK/err.txt")"
mkdir "$WORK/empty"
expect_fail 2 "$WORK/empty: not a run folder (no metrics.jsonl, summary.json or heartbeat/" dlh-report "$WORK/empty"
expect_fail 2 "$WORK/none: not a run folder (no such folder)" dlh-report "$WORK/none"
expect_fail 2 "^dlh-report: --out $WORK/no/r.html: no folder $WORK/no" dlh-report "$run" --out "$WORK/no/r.html"
expect_fail 2 "^dlh-report: missing RUN_DIR" dlh-report
expect_fail 2 "^dlh-report: --watch, --follow and --serve: one at a time" dlh-report "$run" --watch --follow
expect_fail 2 "^dlh-report: --serve 70000: not a port" dlh-report "$run" --serve 70000
expect_fail 2 "^dlh-report: --interval: at least 0.1 seconds" dlh-report "$run" --follow --interval 0
[[ ! -e $WORK/empty/report.html ]] || fail "a report was written for an empty folder"

echo "a running job: --follow, --watch, --serve"
spec 150 >"$WORK/long.json"
live=$WORK/live
dlh-report "$live" --follow --interval 0.3 >"$WORK/follow.txt" 2>&1 &
follow=$!
dlh-report "$live" --watch --interval 0.3 --refresh 7 --out "$WORK/watch.html" >"$WORK/watch.txt" 2>&1 &
watch=$!
dlh-report "$live" --serve 0 >"$WORK/serve.txt" 2>&1 &
serve=$!
mpirun -np 2 dlh-launch train "$WORK/long.json" --run-dir "$live" --threads 1 --progress none \
  --checkpoint-steps 50 >"$WORK/long.log" 2>&1 &
job=$!
trap 'kill $follow $watch $serve $job 2>/dev/null || true; wait; rm -rf "$WORK"' EXIT
# While it runs: the page reloads itself and says the run is going; the server answers.
running_page=
for _ in $(seq 600); do
  # Reloading (the run is going) and with a chart (a step is logged: the start record alone
  # makes a page without one, seen with the sanitized build).
  if [[ -f $WORK/watch.html ]] && grep -q 'http-equiv="refresh" content="7"' "$WORK/watch.html" &&
    grep -q 'class="dlh-chart"' "$WORK/watch.html"; then
    running_page=1
    break
  fi
  kill -0 $job 2>/dev/null || break
  sleep 0.1
done
[[ -n $running_page ]] || fail "--watch: no reloading page while the run went on"
grep -q "This run is still going" "$WORK/watch.html" || fail "--watch: the page does not say the run is going"
url=$(grep -o 'at http://127.0.0.1:[0-9]*/?token=[0-9a-f]*' "$WORK/serve.txt" | head -1 | cut -c4-)
[[ -n $url ]] || { cat "$WORK/serve.txt"; fail "--serve: no private URL announced"; }
python3 - "$url" <<'PY' || fail "--serve: see above"
import socket, sys, time, urllib.request, urllib.error
url = sys.argv[1]
base, token = url.split("/?token=")
port = int(base.rsplit(":", 1)[1])
def get(path, host=None):
    req = urllib.request.Request(base + path)
    if host: req.add_header("Host", host)
    try:
        r = urllib.request.urlopen(req, timeout=30)
        return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
# Idle clients first: one that sends nothing, one that stops inside its request. Each holds
# only its own connection; the report answers beside them (it used to wait on the first).
idle = socket.create_connection(("127.0.0.1", port))
half = socket.create_connection(("127.0.0.1", port))
half.sendall(b"GET /?token=" + token.encode() + b" HTTP/1.1\r\nHost: localhost\r\n")
t0 = time.monotonic()
code, page = get("/?token=" + token)
waited = time.monotonic() - t0
if code != 200 or "DLH run report: " not in page:
    sys.exit(f"--serve: GET with the token: {code} {page[:300]!r}")
if 'class="dlh-chart"' not in page:
    sys.exit(f"--serve: the report of the running job has no chart: {page[:300]!r}")
if waited > 8:
    sys.exit(f"--serve: the page took {waited:.1f} s beside two idle connections")
print(f"  ok: --serve: two idle connections open, GET with the token answered in {waited:.2f} s")
for path, host, want in [("/", None, 403), ("/?token=" + "0" * len(token), None, 403),
                         ("/?token=" + token, "evil.example:8080", 403),
                         ("/etc/passwd?token=" + token, None, 404)]:
    code, body = get(path, host)
    if code != want or "DLH run report" in body:
        sys.exit(f"--serve: GET {path} (Host {host}): {code}, expected {want} and no report")
print("  ok: --serve: no token, a wrong one or a foreign Host (DNS rebinding): 403 and not a "
      "byte of the report; another path: 404")
# The idle connections are closed by the server's deadline (10 s), not kept forever.
idle.settimeout(30)
t0 = time.monotonic()
closed = idle.recv(1) == b""
if not closed or time.monotonic() - t0 > 25:
    sys.exit("--serve: an idle connection was not closed by its deadline")
print("  ok: --serve: an idle connection closed after its deadline")
PY
# Another local user reaches the port but not the token (it is in this user's terminal only).
if [[ $(id -u) -eq 0 ]] && command -v setpriv >/dev/null; then
  other=$(setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c '
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=30); print("200")
except urllib.error.HTTPError as e:
    print(e.code, "report" if "DLH run report" in e.read().decode() else "")' "${url%%\?*}" 2>&1 || true)
  [[ $other == "403 " ]] || fail "--serve: user nobody without the token got '$other'"
  ! setpriv --reuid=nobody --regid=nogroup --clear-groups cat "$WORK/serve.txt" >/dev/null 2>&1 ||
    fail "--serve: user nobody can read the printed URL"
  check "--serve: user nobody gets 403 and cannot read the URL"
else
  [[ ${REQUIRE_SLURM:-0} == 0 ]] || fail "--serve: the second-user check needs root and setpriv"
  echo "  skip: the second-user check needs root and setpriv"
fi
wait $job || { cat "$WORK/long.log"; fail "the long run failed"; }
for pid in $follow $watch; do
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  ! kill -0 "$pid" 2>/dev/null || fail "--follow or --watch still runs 30 s after the run ended"
  wait "$pid" || fail "--follow or --watch exited $?"
done
grep -q "state *running" "$WORK/follow.txt" || { cat "$WORK/follow.txt"; fail "--follow never showed the run running"; }
tail -n 12 "$WORK/follow.txt" | grep -q "state *finished" || { cat "$WORK/follow.txt"; fail "--follow did not end on 'finished'"; }
grep -q "time to the last step" "$WORK/follow.txt" || fail "--follow: no time to the end while running"
check "--follow: $(grep -c '^DLH run' "$WORK/follow.txt") views, running to finished"
! grep -q 'http-equiv="refresh"' "$WORK/watch.html" || fail "--watch: the final page still reloads itself"
grep -q "finished" "$WORK/watch.html" || fail "--watch: the final page does not say finished"
check "--watch: the page reloaded itself while the run went on, and is final now"
kill $serve 2>/dev/null || true
