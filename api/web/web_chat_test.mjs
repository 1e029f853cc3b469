// Drives the web chat page (api/web/index.html, served at / by the head) in
// headless Chromium and checks a two-turn conversation end to end.
//
//   BASE_URL=http://127.0.0.1:8080 node api/web/web_chat_test.mjs
//
// Then checks the ring panel: a card per node, the stages first in ring order
// with their layer ranges, memory bars, and live figures (tokens/s, forward
// ms) once the page has polled twice.
//
// Env: BASE_URL (required), API_KEY (optional; typed into the page's key
// field), CHROMIUM (default /usr/bin/chromium), SCREENSHOT (optional path of
// a PNG taken at the end), TIMEOUT_MS (per reply, default 120000), MAX_TOKENS
// (typed into the page's max tokens field, default 32), RING (optional: the
// expected stages in ring order, "node_id:first:last,..." with last
// excluded), NODES (optional: how many nodes the panel must show).
// Needs `npm ci` in api/web/ (playwright-core) and Debian's chromium.
// Exits 0 on success, 1 with a message on failure.
import { chromium } from 'playwright-core';

const BASE_URL = process.env.BASE_URL;
const EXECUTABLE = process.env.CHROMIUM || '/usr/bin/chromium';
const TIMEOUT_MS = Number(process.env.TIMEOUT_MS || 120000);

function fail(message) {
  console.error('web_chat_test: FAIL: ' + message);
  process.exitCode = 1;
  throw new Error(message);
}

async function run(browser) {
  const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  await page.goto(BASE_URL.replace(/\/$/, '') + '/', { waitUntil: 'load' });
  for (const id of ['#input', '#send', '#stop', '#messages', '#topology', '#error']) {
    if ((await page.locator(id).count()) !== 1) fail(`missing element ${id}`);
  }
  // Short replies keep a two-turn chat inside a small model's context.
  await page.fill('#max-tokens', process.env.MAX_TOKENS || '32');
  if (process.env.API_KEY) {
    await page.fill('#apikey', process.env.API_KEY);
    await page.locator('#apikey').dispatchEvent('change');
  }

  const replies = page.locator('#messages .msg.assistant');
  const prompts = ['Hello! Please introduce yourself briefly.', 'Thanks. Now say it again, shorter.'];
  for (let turn = 0; turn < prompts.length; ++turn) {
    await page.fill('#input', prompts[turn]);
    await page.click('#send');
    const reply = replies.nth(turn);
    try {
      await reply.waitFor({ timeout: 10000 });
      // Finished: done, or stopped/error (reported below).
      await page.waitForFunction(
          (i) => {
            const r = document.querySelectorAll('#messages .msg.assistant')[i];
            return r && r.dataset.state !== 'streaming';
          },
          turn, { timeout: TIMEOUT_MS });
    } catch (e) {
      fail(`reply ${turn + 1} did not finish in time: ${e.message.split('\n')[0]}`);
    }
    const state = await reply.getAttribute('data-state');
    const error = (await page.textContent('#error')).trim();
    if (state !== 'done') fail(`reply ${turn + 1} ended in state "${state}"; #error: "${error}"`);
    if (error) fail(`#error shows "${error}"`);
  }

  if ((await replies.count()) !== 2) fail(`expected 2 assistant messages, got ${await replies.count()}`);
  const texts = [];
  for (let i = 0; i < 2; ++i) {
    const text = (await replies.nth(i).locator('.content').textContent()).trim();
    if (!text) fail(`assistant message ${i + 1} is empty`);
    texts.push(text);
  }
  const cachedText = (await replies.nth(1).locator('.cached').textContent()).trim();
  const cached = Number(cachedText);
  if (!(cached > 0)) fail(`second reply's cached tokens should be > 0, got "${cachedText}"`);

  // The topology panel fills within its first poll.
  try {
    await page.waitForFunction(() => {
      const t = document.querySelector('#topology');
      return t && t.textContent.trim() && !/loading/.test(t.textContent);
    }, null, { timeout: 10000 });
  } catch {
    fail('topology panel stayed empty');
  }
  const topology = (await page.textContent('#topology')).trim();
  if (/unavailable/.test(topology)) fail(`topology panel: ${topology}`);
  const ring = await checkRing(page);
  if (pageErrors.length) fail(`page errors: ${pageErrors.join('; ')}`);

  if (process.env.SCREENSHOT) {
    // Tall enough that the ring panel (which scrolls on its own) shows whole.
    await page.setViewportSize({ width: 1200, height: 1500 });
    await page.waitForTimeout(300);
    await page.screenshot({ path: process.env.SCREENSHOT, fullPage: true });
  }
  console.log(`web_chat_test: OK (reply lengths ${texts.map((t) => t.length).join(', ')}; ` +
              `second reply cached ${cached} tokens)`);
  for (const line of ring) console.log('  ring: ' + line);
}

// What the ring panel shows, card by card.
function readCards() {
  return [...document.querySelectorAll('#topology .ring-node')].map((c) => ({
    id: c.dataset.nodeId,
    position: c.dataset.position ?? null,
    layers: c.querySelector('.layers')?.textContent.trim() ?? '',
    offered: c.querySelector('.mem-offered .bar-value')?.textContent.trim() ?? '',
    used: c.querySelector('.mem-used .bar-value')?.textContent.trim() ?? '',
    tps: c.querySelector('.tps b')?.textContent.trim() ?? '',
    fwd: c.querySelector('.fwd b')?.textContent.trim() ?? '',
    health: c.querySelector('.health')?.textContent.trim() ?? '',
    dots: document.querySelectorAll('#topology svg.ring-svg .ring-dot').length,
  }));
}

// Waits for the ring panel's live figures, then checks it against RING and
// NODES; returns one line per card.
async function checkRing(page) {
  const expected = (process.env.RING || '').split(',').filter(Boolean).map((s) => {
    const [id, first, last] = s.split(':');
    return { id, first: Number(first), last: Number(last) };
  });
  const nodes = Number(process.env.NODES || 0);
  // Figures are numbers once every stage ran a batch and the page polled twice.
  try {
    await page.waitForFunction((want) => {
      const cards = [...document.querySelectorAll('#topology .ring-node')];
      const stages = cards.filter((c) => c.dataset.position !== undefined);
      return cards.length >= Math.max(want, 1) && stages.length > 0 && stages.every((c) =>
        /^[0-9.]+$/.test(c.querySelector('.tps b')?.textContent ?? '') &&
        /^[0-9.]+$/.test(c.querySelector('.fwd b')?.textContent ?? ''));
    }, nodes, { timeout: 20000 });
  } catch {
    fail(`the ring panel's figures did not fill: ${JSON.stringify(await page.evaluate(readCards))}`);
  }
  const cards = await page.evaluate(readCards);
  const lines = cards.map((c) => `${c.position ?? 'idle'} ${c.id}: ${c.layers}; offered ${c.offered}, ` +
                                 `used ${c.used}; ${c.tps} tokens/s, ${c.fwd} ms; ${c.health}`);
  if (nodes && cards.length !== nodes) fail(`ring panel shows ${cards.length} nodes, expected ${nodes}: ${lines}`);
  const stages = cards.filter((c) => c.position !== null);
  if (stages.length && stages[0].dots !== stages.length) fail(`ring picture has ${stages[0].dots} dots for ${stages.length} stages`);
  for (let i = 0; i < stages.length; ++i) {
    const c = stages[i];
    if (c.position !== String(i)) fail(`card ${i} has position ${c.position}`);
    if (!/^layers? \d+/.test(c.layers) || !/ of \d+$/.test(c.layers)) fail(`card ${c.id} layers "${c.layers}"`);
    if (!/[KMG]iB$/.test(c.offered) || !/[KMG]iB$/.test(c.used)) fail(`card ${c.id} memory "${c.offered}", "${c.used}"`);
    if (c.health !== 'healthy') fail(`card ${c.id} health "${c.health}"`);
  }
  if (expected.length) {
    if (stages.length !== expected.length) fail(`ring panel shows ${stages.length} stages, expected ${expected.length}: ${lines}`);
    expected.forEach((e, i) => {
      const c = stages[i];
      if (c.id !== e.id) fail(`stage ${i} is ${c.id}, expected ${e.id}: ${lines}`);
      const want = e.last - e.first === 1 ? `layer ${e.first} of ` : `layers ${e.first}–${e.last - 1} of `;
      if (!c.layers.startsWith(want)) fail(`stage ${i} (${c.id}) shows "${c.layers}", expected "${want}…"`);
    });
  }
  return lines;
}

async function main() {
  if (!BASE_URL) fail('set BASE_URL to a running ringlm API, e.g. http://127.0.0.1:8080');
  const browser = await chromium.launch({
    executablePath: EXECUTABLE,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    await run(browser);
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  if (!process.exitCode) console.error('web_chat_test: FAIL: ' + (e && e.stack || e));
  process.exitCode = 1;
});
