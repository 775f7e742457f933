// trace_view.mjs TRACE OUT [--ranks N --lanes a,b,c] [--expect-reject]:
// open a Chrome trace-event file
// (PTDC_TRACE, ptdc --trace-plan) in a real browser, as a person would, and
// check that what the viewer shows is what the file holds.
//
// The viewer is speedscope (npm, pinned in package.json; its Chrome
// trace-event importer), run in Debian's Chromium, headless, driven by
// playwright-core. The file is loaded the way speedscope's own command line
// loads one (index.html#localProfilePath=). Then:
//   1. no page error and no alert (speedscope alerts on a file it cannot
//      import: --expect-reject inverts the test, proving that);
//   2. speedscope's own export (its Export button, a download) is read back:
//      one profile per (process, thread) of the file that holds spans, named
//      "<process_name> (pid P), <thread_name> (tid T)" from the file's
//      metadata, so every rank and lane is there under its name;
//   3. each profile holds exactly that lane's spans: the same count, names
//      and, relative to the lane's first span, the same starts and
//      durations (0.01 us: the importer's float arithmetic), so spans were
//      neither dropped nor reordered, and they nest (speedscope refuses
//      partial overlap within a lane by closing spans early: a duration
//      would differ);
//   4. with --ranks N --lanes L: processes 0..N-1 each show every lane of L
//      (by thread name) with at least one span;
//   5. a screenshot of the first lane (OUT/shot.png) is not blank: more than
//      2% of the flame chart's pixels are coloured.
// Prints one line per lane and exits 0 only if everything holds.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const [trace, out, ...opts] = process.argv.slice(2);
const expectReject = opts.includes('--expect-reject');
const opt = k => (opts.indexOf(k) >= 0 ? opts[opts.indexOf(k) + 1] : undefined);
const ranks = opt('--ranks') ? Number(opt('--ranks')) : 0;
const lanesWanted = opt('--lanes') ? opt('--lanes').split(',') : [];
if (!trace || !out) {
  console.error('usage: trace_view.mjs TRACE OUT [--ranks N --lanes a,b,c] [--expect-reject]');
  process.exit(2);
}
fs.mkdirSync(out, { recursive: true });
let failed = false;
const bad = msg => { console.log('FAIL: ' + msg); failed = true; };

// What the file holds: spans per (pid, tid), with the names metadata gives.
function lanesOf(file) {
  const d = JSON.parse(fs.readFileSync(file, 'utf8'));
  const ev = Array.isArray(d) ? d : d.traceEvents;
  const proc = new Map(), thread = new Map(), lanes = new Map();
  const open = new Map();
  const lane = (pid, tid) => {
    const k = pid + '/' + tid;
    if (!lanes.has(k)) lanes.set(k, { pid, tid, spans: [] });
    return lanes.get(k);
  };
  for (const e of ev) {
    if (e.ph === 'M' && e.name === 'process_name') proc.set(e.pid, e.args.name);
    else if (e.ph === 'M' && e.name === 'thread_name') thread.set(e.pid + '/' + e.tid, e.args.name);
    else if (e.ph === 'X') lane(e.pid, e.tid).spans.push({ name: e.name, ts: e.ts, dur: e.dur });
    else if (e.ph === 'B') {
      const k = e.pid + '/' + e.tid;
      if (!open.has(k)) open.set(k, []);
      open.get(k).push(e);
    } else if (e.ph === 'E') {
      const b = open.get(e.pid + '/' + e.tid).pop();
      lane(e.pid, e.tid).spans.push({ name: b.name, ts: b.ts, dur: e.ts - b.ts });
    }
  }
  for (const [k, l] of lanes) {
    l.thread = thread.get(k);
    l.title = `${proc.get(l.pid)} (pid ${l.pid}), ${l.thread} (tid ${l.tid})`;
    l.spans.sort((a, b) => a.ts - b.ts || b.dur - a.dur);
  }
  return lanes;
}

const src = fs.readFileSync(trace);
const js = path.join(out, 'profile.js');
fs.writeFileSync(js, `speedscope.loadFileFromBase64(${JSON.stringify(path.basename(trace))}, ` +
                     `${JSON.stringify(src.toString('base64'))})`);
const index = path.join(here, 'node_modules/speedscope/dist/release/index.html');
const browser = await chromium.launch({
  executablePath: process.env.PTDC_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox'],
});
const page = await browser.newPage({ viewport: { width: 1400, height: 800 }, acceptDownloads: true });
const problems = [];
page.on('pageerror', e => problems.push('page error: ' + e));
page.on('dialog', d => { problems.push('alert: ' + d.message()); d.dismiss(); });
await page.goto('file://' + index + '#localProfilePath=' + js);
// speedscope titles a loaded profile "NAME (i/N)"
const loaded = await page.waitForFunction(() => /\(\d+\/\d+\)/.test(document.body.innerText), null,
                                          { timeout: 30000 }).then(() => true, () => false);
if (expectReject) {
  await browser.close();
  if (loaded || problems.length === 0) {
    console.log(`FAIL: ${trace} was imported, expected a refusal`);
    process.exit(1);
  }
  console.log(`rejected as expected: ${problems[0]}`);
  process.exit(0);
}
if (!loaded) bad('speedscope loaded no profile in 30 s');
for (const p of problems) bad(p);

let exported = null;
if (loaded) {
  const shot = path.join(out, 'shot.png');
  await page.screenshot({ path: shot });
  // Coloured pixels of the flame chart (below the toolbar and the minimap's
  // ruler), counted in the page from the PNG itself.
  const png = 'data:image/png;base64,' + fs.readFileSync(shot).toString('base64');
  const frac = await page.evaluate(async url => {
    const img = new Image();
    img.src = url;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.width; c.height = img.height;
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    const y0 = 40, h = Math.min(200, img.height - y0);
    const px = g.getImageData(0, y0, img.width, h).data;
    let coloured = 0;
    for (let i = 0; i < px.length; i += 4) {
      const r = px[i], gg = px[i + 1], b = px[i + 2];
      if (Math.max(r, gg, b) - Math.min(r, gg, b) > 30) coloured++;
    }
    return coloured / (img.width * h);
  }, png);
  if (!(frac > 0.02)) bad(`the screenshot's flame chart is blank (${(100 * frac).toFixed(1)}% coloured)`);
  else console.log(`screenshot ${shot}: ${(100 * frac).toFixed(0)}% of the chart coloured`);
  const [dl] = await Promise.all([page.waitForEvent('download'), page.getByText('Export').click()]);
  const file = path.join(out, 'speedscope-export.json');
  await dl.saveAs(file);
  exported = JSON.parse(fs.readFileSync(file, 'utf8'));
}
await browser.close();

if (exported) {
  const want = lanesOf(trace);
  const frames = exported.shared.frames.map(f => f.name.replace(/ \{.*\}$/, ''));
  const got = new Map(exported.profiles.map(p => [p.name, p]));
  if (exported.profiles.length !== want.size)
    bad(`speedscope shows ${exported.profiles.length} lanes, the file has ${want.size}`);
  for (let r = 0; r < ranks; r++)
    for (const name of lanesWanted) {
      const l = [...want.values()].find(x => x.pid === r && x.thread === name);
      if (!l || !got.has(l.title)) bad(`rank ${r} has no lane "${name}" in the viewer`);
    }
  for (const l of want.values()) {
    const p = got.get(l.title);
    if (!p) { bad(`no lane "${l.title}" in the viewer`); continue; }
    const spans = [], stack = [];
    for (const e of p.events) {
      if (e.type === 'O') stack.push(e);
      else {
        const o = stack.pop();
        spans.push({ name: frames[o.frame], at: o.at, dur: e.at - o.at });
      }
    }
    spans.sort((a, b) => a.at - b.at || b.dur - a.dur);
    let why = '';
    if (spans.length !== l.spans.length) why = `${spans.length} spans shown, ${l.spans.length} in the file`;
    for (let i = 0; !why && i < spans.length; i++) {
      const s = spans[i], f = l.spans[i];
      if (s.name !== f.name) why = `span ${i} is "${s.name}", the file's "${f.name}"`;
      else if (Math.abs(s.dur - f.dur) > 0.01) why = `span ${i} "${f.name}" lasts ${s.dur} us, the file's ${f.dur}`;
      else if (Math.abs((s.at - spans[0].at) - (f.ts - l.spans[0].ts)) > 0.01)
        why = `span ${i} "${f.name}" starts at ${s.at - spans[0].at} us, the file's ${f.ts - l.spans[0].ts}`;
    }
    if (why) bad(`${l.title}: ${why}`);
    else console.log(`ok ${l.title}: ${spans.length} spans`);
  }
}
process.exit(failed ? 1 : 0);
