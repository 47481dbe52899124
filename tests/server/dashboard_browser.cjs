// Drives the dashboard in headless Chromium for tests/server/dashboard_test.py (puppeteer-core,
// installed by that test under build/; NODE_PATH points at it).
//
//   node dashboard_browser.cjs --url http://127.0.0.1:PORT/dashboard?interval=500 --chromium PATH
//
// Reads one command per stdin line and answers one JSON line on stdout ({driver_error} when a
// command fails):
//   read             what the page shows: {updates, error, server: {id: {text, value}},
//                    models: {key: {kind, gone, errors, figures: {id: {text, value}},
//                    charts: {id: {type, labels, points: [per dataset: non-null points]}}}}}
//   wait N           waits until the page has done N more updates (at most 30 s): {updates}
//   screenshot PATH  a full-page PNG: {ok: true}
//   eval EXPR        the value of a JS expression in the page (Maps as objects, ±Infinity as
//                    "+Inf"/"-Inf"): {value}; tests call window.inferdDashboard's functions
//   quit             {requests: [every URL the page fetched], problems: [console errors,
//                    page errors, failed requests]} and exits
'use strict';

const puppeteer = require('puppeteer-core');
const readline = require('readline');

function arg(name) {
  const i = process.argv.indexOf(name);
  if (i < 0 || i + 1 >= process.argv.length) throw new Error(`missing ${name}`);
  return process.argv[i + 1];
}

// Runs in the page: the figures' text and raw value, the charts' points (Chart.getChart).
function readPage() {
  const figures = (root) => Object.fromEntries([...root.querySelectorAll('[data-stat]')].map((f) => {
    const v = f.querySelector('.v');
    return [f.dataset.stat, {text: v.textContent, value: v.dataset.value === '' ? null : Number(v.dataset.value)}];
  }));
  const models = {};
  for (const card of document.querySelectorAll('section.card')) {
    const charts = {};
    for (const canvas of card.querySelectorAll('canvas[data-chart]')) {
      const c = Chart.getChart(canvas);
      charts[canvas.dataset.chart] = {
        type: c.config.type,
        labels: c.data.labels || [],
        points: c.data.datasets.map((d) => d.data.filter((p) => (typeof p === 'object' ? p.y !== null : p !== null)).length),
        values: c.data.datasets.map((d) => d.data.map((p) => (typeof p === 'object' ? p.y : p))),
      };
    }
    models[card.dataset.model] = {
      kind: card.dataset.kind, gone: card.classList.contains('gone'),
      errors: card.dataset.errors ? JSON.parse(card.dataset.errors) : null,
      figures: figures(card), charts,
    };
  }
  const server = {};
  for (const id of ['cpu', 'rss', 'uptime', 'window', 'updated']) {
    const e = document.getElementById(id);
    server[id] = {text: e.textContent, value: e.dataset.value ? Number(e.dataset.value) : null};
  }
  const error = document.getElementById('error');
  return {updates: Number(document.body.dataset.updates || 0), error: error.hidden ? null : error.textContent,
          server, models, scrapes: window.inferdDashboard.scrapes};
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath: arg('--chromium'), headless: true,
    // --no-sandbox: CI containers run as root, where Chromium's sandbox cannot start.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const page = await browser.newPage();
  await page.setViewport({width: 1280, height: 900});
  const requests = [];
  const problems = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  const resp = await page.goto(arg('--url'), {waitUntil: 'load'});
  if (!resp.ok()) throw new Error(`dashboard answered ${resp.status()}`);

  const say = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
  const rl = readline.createInterface({input: process.stdin});
  for await (const line of rl) {
    const [cmd, rest] = [line.split(' ')[0], line.split(' ').slice(1).join(' ')];
    try {
      if (cmd === 'read') {
        say(await page.evaluate(readPage));
      } else if (cmd === 'wait') {
        const target = (await page.evaluate(() => Number(document.body.dataset.updates || 0))) + Number(rest);
        await page.waitForFunction((t) => Number(document.body.dataset.updates || 0) >= t,
                                   {timeout: 30000, polling: 100}, target);
        say({updates: await page.evaluate(() => Number(document.body.dataset.updates))});
      } else if (cmd === 'eval') {
        say({value: await page.evaluate((expr) => JSON.parse(JSON.stringify(
            (0, eval)(expr), (k, v) => (v instanceof Map ? Object.fromEntries(v)
                : v === Infinity ? '+Inf' : v === -Infinity ? '-Inf' : v))), rest)});
      } else if (cmd === 'screenshot') {
        await page.screenshot({path: rest, fullPage: true});
        say({ok: true});
      } else if (cmd === 'quit') {
        say({requests, problems});
        break;
      } else {
        say({driver_error: `unknown command '${cmd}'`});
      }
    } catch (e) {
      say({driver_error: String(e)});
    }
  }
  await browser.close();
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({driver_error: String(e && e.stack || e)}) + '\n');
  process.exit(1);
});
