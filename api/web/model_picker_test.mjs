// The web chat page's model picker (api/web/index.html), in headless
// Chromium against a scripted stand-in for the API (no ringlm needed): with
// two models the picker lists one entry per model (not its aliases), the
// chosen model goes with the chat request and picks the topology shown; with
// one model it stays hidden and requests name that model.
//
//   node api/web/model_picker_test.mjs
//
// Env: CHROMIUM (default /usr/bin/chromium). Needs `npm ci` in api/web/
// (playwright-core). Exits 0 on success, 77 when playwright-core or Chromium
// is missing, 1 with a message on failure.
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';

const EXECUTABLE = process.env.CHROMIUM || '/usr/bin/chromium';
const PAGE = readFileSync(new URL('./index.html', import.meta.url));

function fail(message) {
  console.error('model_picker_test: FAIL: ' + message);
  process.exitCode = 1;
  throw new Error(message);
}

// What /v1/models lists: `models` is [{root, aliases, state}].
function modelList(models) {
  const data = [];
  for (const m of models) {
    for (const id of [m.root, ...(m.aliases || [])]) {
      data.push({ id, object: 'model', created: 0, owned_by: 'ringlm', root: m.root, state: m.state });
    }
  }
  return { object: 'list', data };
}

// Serves the page and a scripted API; records every chat body and topology query.
async function startFakeApi(models) {
  const seen = { chats: [], topologies: [] };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/') {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      return res.end(PAGE);
    }
    if (url.pathname === '/v1/models') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      return res.end(JSON.stringify(modelList(models)));
    }
    if (url.pathname === '/v1/topology') {
      const model = url.searchParams.get('model') || models[0].root;
      seen.topologies.push(url.searchParams.get('model'));
      res.writeHead(200, { 'Content-Type': 'application/json' });
      return res.end(JSON.stringify({ model, nodes: [{ node_id: 'node-of-' + model, layers: [0, 3] }] }));
    }
    if (url.pathname === '/v1/chat/completions' && req.method === 'POST') {
      let body = '';
      req.on('data', (d) => { body += d; });
      req.on('end', () => {
        const request = JSON.parse(body);
        seen.chats.push(request);
        const frame = (o) => 'data: ' + JSON.stringify(o) + '\n\n';
        res.writeHead(200, { 'Content-Type': 'text/event-stream' });
        res.end(frame({ model: request.model, choices: [{ index: 0, delta: { content: 'from ' + request.model } }] }) +
                frame({ model: request.model, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }],
                        usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5,
                                 prompt_tokens_details: { cached_tokens: 0 } } }) +
                'data: [DONE]\n\n');
      });
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, seen, base: `http://127.0.0.1:${server.address().port}` };
}

const pageErrors = [];
async function openPage(browser, base) {
  const page = await browser.newPage();
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  await page.goto(base + '/', { waitUntil: 'load' });
  return page;
}

async function ask(page, turn, text) {
  await page.fill('#input', text);
  await page.click('#send');
  await page.waitForFunction((i) => {
    const r = document.querySelectorAll('#messages .msg.assistant')[i];
    return r && r.dataset.state !== 'streaming';
  }, turn, { timeout: 10000 });
  return (await page.locator('#messages .msg.assistant .content').nth(turn).textContent()).trim();
}

async function twoModels(browser) {
  const api = await startFakeApi([
    { root: 'alpha', aliases: ['gpt-4o-mini'], state: 'ready' },
    { root: 'beta', state: 'loading' },
  ]);
  try {
    const page = await openPage(browser, api.base);
    const picker = page.locator('#model-picker');
    await picker.waitFor({ state: 'visible', timeout: 10000 });
    const options = await picker.locator('option').allTextContents();
    if (JSON.stringify(options) !== JSON.stringify(['alpha', 'beta (loading)'])) {
      fail(`picker options: ${JSON.stringify(options)}`);
    }
    if ((await picker.inputValue()) !== 'alpha') fail('the first model is not chosen at first');
    if ((await ask(page, 0, 'Hello')) !== 'from alpha') fail('the first reply is not from alpha');

    await picker.selectOption('beta');
    await page.waitForFunction(() => /node-of-beta/.test(document.querySelector('#topology').textContent),
                               null, { timeout: 10000 });
    if ((await ask(page, 1, 'And you?')) !== 'from beta') fail('the second reply is not from beta');
    const models = api.seen.chats.map((c) => c.model);
    if (JSON.stringify(models) !== JSON.stringify(['alpha', 'beta'])) {
      fail(`chat requests named ${JSON.stringify(models)}`);
    }
    if (!api.seen.topologies.includes('beta')) fail('the topology of beta was never asked for');
    await page.close();
  } finally {
    api.server.close();
  }
}

async function oneModel(browser) {
  const api = await startFakeApi([{ root: 'only', aliases: ['alias'], state: 'ready' }]);
  try {
    const page = await openPage(browser, api.base);
    await page.waitForFunction(() => document.querySelector('#model').textContent === 'model: only',
                               null, { timeout: 10000 });
    if (await page.locator('#model-picker').isVisible()) fail('the picker shows for one model');
    await ask(page, 0, 'Hello');
    if (api.seen.chats[0].model !== 'only') fail(`the request named ${api.seen.chats[0].model}`);
    await page.close();
  } finally {
    api.server.close();
  }
}

async function main() {
  let chromium;
  try {
    ({ chromium } = await import('playwright-core'));
  } catch {
    console.log('model_picker_test: SKIP (no playwright-core: npm ci in api/web)');
    process.exit(77);
  }
  if (!existsSync(EXECUTABLE)) {
    console.log(`model_picker_test: SKIP (no Chromium at ${EXECUTABLE})`);
    process.exit(77);
  }
  const browser = await chromium.launch({
    executablePath: EXECUTABLE,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    for (const scenario of [twoModels, oneModel]) await scenario(browser);
  } finally {
    await browser.close();
  }
  if (pageErrors.length) fail(`page errors: ${pageErrors.join('; ')}`);
  console.log('model_picker_test: OK');
}

main().catch((e) => {
  if (!process.exitCode) console.error('model_picker_test: FAIL: ' + (e && e.stack || e));
  process.exitCode = 1;
});
