#!/bin/bash
# check-page.sh PAGE.html SCREENSHOT.png [WIDTH HEIGHT]: loads one of DLH's HTML pages in
# headless Chromium (Debian's chromium) as a reader would, and fails unless
#   - the browser logged nothing to its console (a page of DLH's has no script, so any
#     console line is an error: a broken resource, a parse error),
#   - the page has at least one chart, and every chart (svg.dlh-chart) says it has data
#     (data-points > 0) and draws some: one of its data marks (class "d") has a non-empty
#     box in the laid-out page,
#   - every image (<img>: a report's misclassified samples, inline) decoded,
# and writes a screenshot of the page. A probe script is added to a copy of the page (the
# page itself has none); it reports on the console with the prefix DLH-PAGE, which is
# the one console line expected.
set -euo pipefail
page=${1:?usage: check-page.sh PAGE.html SCREENSHOT.png [WIDTH HEIGHT]}
shot=${2:?usage: check-page.sh PAGE.html SCREENSHOT.png [WIDTH HEIGHT]}
width=${3:-1600} height=${4:-3000}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[[ -n $browser ]] || { echo "check-page.sh: no chromium (apt-get install chromium; make check installs it)" >&2; exit 2; }
[[ -f $page ]] || { echo "check-page.sh: $page: no such file" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlh-page-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
probe='<script>
window.addEventListener("load", function () {
  var images = document.querySelectorAll("img"), broken = 0;
  images.forEach(function (img) { if (!img.complete || !(img.naturalWidth > 0)) broken++; });
  var charts = document.querySelectorAll("svg.dlh-chart"), empty = [];
  charts.forEach(function (svg) {
    var marks = svg.querySelectorAll(".d"), drawn = false;
    marks.forEach(function (m) { var b = m.getBBox(); if (b.width + b.height > 0) drawn = true; });
    if (!(+svg.getAttribute("data-points") > 0) || !drawn)
      empty.push(svg.querySelector("title") ? svg.querySelector("title").textContent : "?");
  });
  console.log("DLH-PAGE images=" + images.length + " broken=" + broken + " charts=" +
              charts.length + " empty=" + JSON.stringify(empty));
});
</script>'
# The probe goes last in the body, where the whole page has been parsed.
python3 - "$page" "$tmp/page.html" "$probe" <<'PY'
import sys
text = open(sys.argv[1], encoding="utf-8").read()
at = text.rfind("</body>")
if at < 0:
    sys.exit(f"check-page.sh: {sys.argv[1]}: no </body>: not a whole page")
open(sys.argv[2], "w", encoding="utf-8").write(text[:at] + sys.argv[3] + text[at:])
PY
# --virtual-time-budget: the screenshot is taken once the page (and the probe) are done.
# The dbus and GPU complaints of a headless browser in a container go to its log, not the
# page's console, and are ignored.
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
  --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0 --virtual-time-budget=5000 \
  --window-size="$width,$height" --screenshot="$shot" "file://$tmp/page.html" \
  >"$tmp/out.txt" 2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; echo "check-page.sh: chromium failed on $page" >&2; exit 1; }
[[ -s $shot ]] || { echo "check-page.sh: no screenshot written to $shot" >&2; exit 1; }
console=$(grep -F ':CONSOLE' "$tmp/err.txt" || true)
probe_line=$(grep -o 'DLH-PAGE images=[0-9]* broken=[0-9]* charts=[0-9]* empty=[^"]*' <<<"$console" || true)
others=$(grep -vF 'DLH-PAGE' <<<"$console" || true)
[[ -n $probe_line ]] || { cat "$tmp/err.txt" >&2; echo "check-page.sh: $page: the probe did not run" >&2; exit 1; }
[[ -z $others ]] || { echo "$others" >&2; echo "check-page.sh: $page: console errors (above)" >&2; exit 1; }
charts=$(sed -E 's/.*charts=([0-9]+).*/\1/' <<<"$probe_line")
images=$(sed -E 's/.*images=([0-9]+).*/\1/' <<<"$probe_line")
broken=$(sed -E 's/.*broken=([0-9]+).*/\1/' <<<"$probe_line")
empty=$(sed -E 's/.*empty=//' <<<"$probe_line")
((charts > 0)) || { echo "check-page.sh: $page: no chart" >&2; exit 1; }
[[ $empty == '[]' ]] || { echo "check-page.sh: $page: charts without data: $empty" >&2; exit 1; }
((broken == 0)) || { echo "check-page.sh: $page: $broken of $images images did not decode" >&2; exit 1; }
shown=
((images > 0)) && shown="; $images images, each decoded"
echo "$page: $charts charts, each with data$shown; no console error; screenshot $shot"
