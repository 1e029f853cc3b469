// Drives the web chat page (api/web/index.html, served at / by the head) in
// headless Chromium and checks a two-turn conversation end to end.
//
//   BASE_URL=http://127.0.0.1:8080 node api/web/web_chat_test.mjs
//
// Env: BASE_URL (required), API_KEY (optional; typed into the page's key
// field), CHROMIUM (default /usr/bin/chromium), SCREENSHOT (optional path of
// a PNG taken at the end), TIMEOUT_MS (per reply, default 120000), MAX_TOKENS
// (typed into the page's max tokens field, default 32).
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
  if (/topology unavailable/.test(topology)) fail(`topology panel: ${topology}`);
  if (pageErrors.length) fail(`page errors: ${pageErrors.join('; ')}`);

  if (process.env.SCREENSHOT) await page.screenshot({ path: process.env.SCREENSHOT, fullPage: true });
  console.log(`web_chat_test: OK (reply lengths ${texts.map((t) => t.length).join(', ')}; ` +
              `second reply cached ${cached} tokens)`);
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
