// inferd's live dashboard (server/dashboard.h). Polls GET /metrics — the Prometheus text a scrape
// gets, so the page can never disagree with it — keeps the scrapes of the last `window` seconds
// and derives per model what Prometheus would: rates are counter differences over the window
// (rate()), percentiles are interpolated in the window's histogram bucket differences
// (histogram_quantile()). Figures carry the raw number in data-value for tests.
//
// Query parameters: interval=MS between polls (default 1000), window=S seconds that rates and
// percentiles cover (default 10), points=N chart points kept (default 120).
'use strict';

(() => {
  const params = new URLSearchParams(location.search);
  function param(name, fallback, lo, hi) {
    const v = Number(params.get(name));
    return params.has(name) && Number.isFinite(v) ? Math.min(hi, Math.max(lo, v)) : fallback;
  }
  const INTERVAL_MS = param('interval', 1000, 200, 60000);
  const WINDOW_S = param('window', 10, 1, 600);
  const POINTS = param('points', 120, 10, 5000);
  const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#4b5563'];

  // ---- The exposition format (0.0.4): `name{k="v",...} value [timestamp]` lines. ----
  function unescapeLabel(s) {
    return s.replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
  }
  // A sample value or a bucket bound; null for text that is not a number.
  function parseValue(s) {
    if (s === '+Inf') return Infinity;
    if (s === '-Inf') return -Infinity;
    if (s === 'NaN') return NaN;
    const v = Number(s);
    return s.trim() !== '' && Number.isFinite(v) ? v : null;
  }
  // Returns Map(family sample name -> [{labels, value}]); comments and bad lines are skipped.
  function parseMetrics(text) {
    const out = new Map();
    const line_re = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
    const label_re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
    for (const line of text.split('\n')) {
      if (line === '' || line[0] === '#') continue;
      const m = line_re.exec(line);
      const value = m ? parseValue(m[3]) : null;
      if (value === null) continue;
      const labels = {};
      for (const l of (m[2] || '').matchAll(label_re)) labels[l[1]] = unescapeLabel(l[2]);
      if (!out.has(m[1])) out.set(m[1], []);
      out.get(m[1]).push({labels, value});
    }
    return out;
  }

  // ---- Reading one scrape. `sel` is a labels subset ({model, version}) a series must match. ----
  function matches(labels, sel) {
    return Object.entries(sel).every(([k, v]) => labels[k] === v);
  }
  function sum(scrape, name, sel) {
    let total = null;
    for (const s of scrape.get(name) || []) {
      if (matches(s.labels, sel)) total = (total || 0) + s.value;
    }
    return total;
  }
  function byLabel(scrape, name, sel, label) {  // Map(label value -> sample value)
    const out = new Map();
    for (const s of scrape.get(name) || []) {
      if (matches(s.labels, sel)) out.set(s.labels[label], (out.get(s.labels[label]) || 0) + s.value);
    }
    return out;
  }
  // A histogram as [{le, count}] with cumulative counts, ascending bounds (+Inf last).
  function buckets(scrape, name, sel) {
    const m = byLabel(scrape, name + '_bucket', sel, 'le');
    return [...m].map(([le, count]) => ({le: parseValue(le), count}))
        .filter((b) => b.le !== null).sort((a, b) => a.le - b.le);
  }

  // ---- Window arithmetic: `now` and `then` are scrapes {t (s), data}; then may be null. ----
  function delta(now, then) {  // counter increase, a reset (restart, reload) counted from zero
    if (now === null) return null;
    if (then === null) return null;
    return now >= then ? now - then : now;
  }
  // A counter's increase over the window; a series that appeared within it started at 0 (a
  // failure reason's first occurrence). Null when the scrape lacks it or there is no window yet.
  function increase(w, name, sel) {
    return delta(sum(w.now.data, name, sel), w.then ? sum(w.then.data, name, sel) ?? 0 : null);
  }
  function rate(w, name, sel) {
    const d = increase(w, name, sel);
    return d === null ? null : d / w.dt;
  }
  function windowBuckets(w, name, sel) {
    const now = buckets(w.now.data, name, sel);
    if (!w.then) return null;
    const then = new Map(buckets(w.then.data, name, sel).map((b) => [b.le, b.count]));
    return now.map((b) => ({le: b.le, count: delta(b.count, then.get(b.le) || 0)}));
  }
  // histogram_quantile(): linear interpolation inside the bucket holding rank q·total; the +Inf
  // bucket answers the highest finite bound. Null when the window saw no observations.
  function quantile(q, cum) {
    if (!cum || cum.length === 0) return null;
    const total = cum[cum.length - 1].count;
    if (!(total > 0)) return null;
    const rank = q * total;
    let prev_le = 0;
    let prev_count = 0;
    for (const b of cum) {
      if (b.count >= rank) {
        if (b.le === Infinity) return prev_le;
        const in_bucket = b.count - prev_count;  // > 0: count >= rank > prev_count
        return prev_le + (b.le - prev_le) * (rank - prev_count) / in_bucket;
      }
      prev_le = b.le;
      prev_count = b.count;
    }
    return prev_le;
  }
  const ms = (s) => (s === null ? null : s * 1000);
  function percentilesMs(w, name, sel) {
    const cum = windowBuckets(w, name, sel);
    return {p50: ms(quantile(0.5, cum)), p99: ms(quantile(0.99, cum))};
  }
  function gauge(w, name, sel) {
    return sum(w.now.data, name, sel);
  }
  // The instance gauge of a model (any version when `sel` has none).
  function instances(w, sel) {
    return gauge(w, 'inferd_model_instances', sel);
  }

  // ---- What each kind of model shows. ----
  function kserveView(w, sel) {
    const failures = byLabel(w.now.data, 'inferd_request_failure_total', sel, 'reason');
    const failed = [...failures.values()].reduce((a, b) => a + b, 0);
    const ok_rate = rate(w, 'inferd_request_success_total', sel);
    const err_rate = rate(w, 'inferd_request_failure_total', sel) ?? (w.then ? 0 : null);
    const batches = windowBuckets(w, 'inferd_batch_size', sel);
    const batch_count = increase(w, 'inferd_batch_size_count', sel);
    const batch_sum = increase(w, 'inferd_batch_size_sum', sel);
    const latency = percentilesMs(w, 'inferd_request_duration_seconds', sel);
    // Busy instance-seconds per second over the instances: the autoscaler's utilization signal.
    const busy = rate(w, 'inferd_model_busy_seconds_total', sel);
    const count = instances(w, sel);
    return {
      requests: sum(w.now.data, 'inferd_request_success_total', sel) + failed,
      rate: ok_rate === null ? null : ok_rate + (err_rate || 0),
      error_rate: err_rate,
      p50: latency.p50,
      p99: latency.p99,
      queue: gauge(w, 'inferd_pending_requests', sel),
      instances: count,
      utilization: busy !== null && count > 0 ? Math.min(100, 100 * busy / count) : null,
      scale_events: sum(w.now.data, 'inferd_model_scale_events_total', sel),
      mean_batch: batch_count > 0 ? batch_sum / batch_count : null,
      // Per-bucket (not cumulative) batch counts of the window.
      batch_hist: batches && batches.map((b, i) => ({
        le: b.le, count: b.count - (i > 0 ? batches[i - 1].count : 0)})),
      errors: failures,
    };
  }
  function generativeView(w, sel) {
    const ttft = percentilesMs(w, 'inferd_time_to_first_token_seconds', sel);
    const tpot = percentilesMs(w, 'inferd_time_per_output_token_seconds', sel);
    const e2e = percentilesMs(w, 'inferd_e2e_request_latency_seconds', sel);
    const kv = gauge(w, 'inferd_kv_cache_usage_perc', sel);
    return {
      requests: sum(w.now.data, 'inferd_generation_requests_total', sel),
      rate: rate(w, 'inferd_generation_requests_total', sel),
      tokens_rate: rate(w, 'inferd_generation_tokens_total', sel),
      p50: e2e.p50, p99: e2e.p99,
      ttft_p50: ttft.p50, ttft_p99: ttft.p99, tpot_p50: tpot.p50, tpot_p99: tpot.p99,
      running: gauge(w, 'inferd_num_requests_running', sel),
      queue: gauge(w, 'inferd_num_requests_waiting', sel),
      kv_pct: kv === null ? null : kv * 100,
      kv_blocks: gauge(w, 'inferd_kv_cache_blocks_used', sel),
      preemptions: sum(w.now.data, 'inferd_num_preemptions_total', sel),
      instances: instances(w, sel),
    };
  }

  // Figures (id, label, unit, decimals) and time-series charts (id, title, [series]) per kind.
  const LAYOUT = {
    kserve: {
      title: 'KServe',
      figures: [['requests', 'requests', '', 0], ['rate', 'request rate', 'req/s', 1],
                ['p50', 'P50 latency', 'ms', 2], ['p99', 'P99 latency', 'ms', 2],
                ['queue', 'queue depth', '', 0], ['instances', 'instances', '', 0],
                ['utilization', 'utilization', '%', 1], ['scale_events', 'scale events', '', 0],
                ['mean_batch', 'mean batch', 'rows', 2], ['error_rate', 'errors', 'req/s', 2]],
      series: [['throughput', 'Requests/s', [['rate', 'all'], ['error_rate', 'errors']]],
               ['latency', 'Latency (ms)', [['p50', 'P50'], ['p99', 'P99']]],
               ['queue', 'Queue depth and instances', [['queue', 'queue'], ['instances', 'instances']]],
               ['utilization', 'Instance utilization (%)', [['utilization', 'busy']]]],
      bars: [['batch', 'Batch size (rows, last window)'], ['errors', 'Errors by reason (total)']],
    },
    generative: {
      title: 'generative',
      figures: [['requests', 'requests', '', 0], ['rate', 'request rate', 'req/s', 2],
                ['tokens_rate', 'tokens', 'tok/s', 1], ['ttft_p50', 'TTFT P50', 'ms', 1],
                ['ttft_p99', 'TTFT P99', 'ms', 1], ['tpot_p50', 'TPOT P50', 'ms', 2],
                ['tpot_p99', 'TPOT P99', 'ms', 2], ['running', 'running', '', 0],
                ['queue', 'waiting', '', 0], ['kv_pct', 'KV cache', '%', 1],
                ['instances', 'instances', '', 0]],
      series: [['throughput', 'Requests/s and tokens/s', [['rate', 'requests/s'], ['tokens_rate', 'tokens/s', 'y1']]],
               ['ttft', 'TTFT (ms)', [['ttft_p50', 'P50'], ['ttft_p99', 'P99']]],
               ['tpot', 'TPOT (ms)', [['tpot_p50', 'P50'], ['tpot_p99', 'P99']]],
               ['queue', 'Sequences', [['running', 'running'], ['queue', 'waiting']]],
               ['kv', 'KV cache usage (%)', [['kv_pct', 'used']]]],
      bars: [],
    },
  };

  // ---- DOM and charts. ----
  const cards = new Map();  // model key -> {el, kind, figures: Map(id -> element), charts}
  function element(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const clock = (t) => new Date(t * 1000).toLocaleTimeString('en-GB');  // 24-hour hh:mm:ss
  // The x range is the data's, and Chart.js puts a tick at each end of it: one closer than half
  // a step to its neighbour would print over that neighbour's label.
  function spaceEndTicks(axis) {
    const t = axis.ticks;
    if (t.length < 4) return;
    const step = t[2].value - t[1].value;
    if (t[t.length - 1].value - t[t.length - 2].value < step / 2) t.pop();
    if (t[1].value - t[0].value < step / 2) t.shift();
  }
  function timeChart(canvas, title, series) {
    const axes = {x: {type: 'linear', bounds: 'data', afterBuildTicks: spaceEndTicks,
                      ticks: {maxTicksLimit: 5, callback: clock}},
                  y: {beginAtZero: true}};
    if (series.some((s) => s[2] === 'y1')) {
      axes.y1 = {beginAtZero: true, position: 'right', grid: {drawOnChartArea: false}};
    }
    return new Chart(canvas, {
      type: 'line',
      data: {datasets: series.map(([, label, axis], i) => ({
        label, data: [], yAxisID: axis || 'y', borderColor: COLORS[i], backgroundColor: COLORS[i],
        pointRadius: 0, borderWidth: 2, spanGaps: false}))},
      options: {animation: false, maintainAspectRatio: false, parsing: false, normalized: true,
                plugins: {title: {display: true, text: title}}, scales: axes},
    });
  }
  function barChart(canvas, title) {
    return new Chart(canvas, {
      type: 'bar',
      data: {labels: [], datasets: [{label: title, data: [], backgroundColor: COLORS[0],
                                     maxBarThickness: 48}]},
      options: {animation: false, maintainAspectRatio: false,
                plugins: {title: {display: true, text: title}, legend: {display: false}},
                scales: {y: {beginAtZero: true, ticks: {precision: 0}}}},
    });
  }
  function addChart(parent, id, make) {
    const box = element('div', {class: 'chart'});
    const canvas = element('canvas', {'data-chart': id});
    box.append(canvas);
    parent.append(box);
    return make(canvas);
  }
  function createCard(key, kind, model, version) {
    const layout = LAYOUT[kind];
    const el = element('section', {class: 'card', 'data-model': key, 'data-kind': kind});
    const h = element('h2', {}, model);
    const sub = (version !== undefined ? `version ${version} · ` : '') + layout.title;
    h.append(element('span', {class: 'kind'}, sub));
    const figs = element('div', {class: 'figures'});
    const figures = new Map();
    for (const [id, label, unit] of layout.figures) {
      const f = element('span', {class: 'stat', 'data-stat': id});
      f.append(element('label', {}, label + (unit ? ` (${unit})` : '')));
      const v = element('span', {class: 'v'}, '–');
      f.append(v);
      figs.append(f);
      figures.set(id, v);
    }
    const grid = element('div', {class: 'charts'});
    const charts = {};
    for (const [id, title, series] of layout.series) {
      charts[id] = addChart(grid, id, (c) => timeChart(c, title, series));
    }
    for (const [id, title] of layout.bars) charts[id] = addChart(grid, id, (c) => barChart(c, title));
    el.append(h, figs, grid);
    const list = document.getElementById('models');
    // Cards stay sorted by key so the page does not reshuffle as models appear.
    const after = [...cards.keys()].filter((k) => k > key).sort()[0];
    list.insertBefore(el, after === undefined ? null : cards.get(after).el);
    const card = {el, kind, figures, charts};
    cards.set(key, card);
    return card;
  }

  function format(v, decimals) {
    if (v === null || v === undefined || !Number.isFinite(v)) return '–';
    return v.toLocaleString('en-US', {minimumFractionDigits: decimals, maximumFractionDigits: decimals});
  }
  function updateCard(card, view, t) {
    const layout = LAYOUT[card.kind];
    for (const [id, , , decimals] of layout.figures) {
      const v = card.figures.get(id);
      v.textContent = format(view[id], decimals);
      v.dataset.value = view[id] === null || view[id] === undefined ? '' : String(view[id]);
    }
    for (const [id, , series] of layout.series) {
      const chart = card.charts[id];
      series.forEach(([field], i) => {
        const data = chart.data.datasets[i].data;
        data.push({x: t, y: view[field] ?? null});
        if (data.length > POINTS) data.splice(0, data.length - POINTS);
      });
      chart.update('none');
    }
    if (card.charts.batch && view.batch_hist) {
      // Buckets up to the largest batch seen (at least 4 bars), so the used sizes stay legible.
      const last = view.batch_hist.reduce((a, b, i) => (b.count > 0 ? i : a), 0);
      const hist = view.batch_hist.slice(0, Math.max(last + 1, 4));
      card.charts.batch.data.labels =
          hist.map((b, i) => (b.le === Infinity ? `>${hist[i - 1]?.le}` : `≤${b.le}`));
      card.charts.batch.data.datasets[0].data = hist.map((b) => b.count);
      card.charts.batch.update('none');
    }
    if (card.charts.errors) {
      const reasons = [...view.errors.keys()].sort();
      card.charts.errors.data.labels = reasons.length ? reasons : ['none'];
      card.charts.errors.data.datasets[0].data = reasons.length ? reasons.map((r) => view.errors.get(r)) : [0];
      card.charts.errors.data.datasets[0].backgroundColor = COLORS[1];
      card.charts.errors.update('none');
      card.el.dataset.errors = JSON.stringify(Object.fromEntries(view.errors));
    }
  }

  // Models in a scrape: KServe ones by (model, version) from the request counter, generative
  // ones by model from the generation counter.
  function modelsIn(scrape) {
    const out = new Map();
    for (const s of scrape.get('inferd_request_success_total') || []) {
      const {model, version} = s.labels;
      out.set(`${model}:${version}`, {kind: 'kserve', model, version, sel: {model, version}});
    }
    for (const s of scrape.get('inferd_generation_requests_total') || []) {
      const {model} = s.labels;
      out.set(model, {kind: 'generative', model, version: undefined, sel: {model}});
    }
    return out;
  }

  function updateServer(w) {
    const cpu = rate(w, 'process_cpu_seconds_total', {});
    const rss = gauge(w, 'process_resident_memory_bytes', {});
    const start = gauge(w, 'process_start_time_seconds', {});
    const set = (id, v, text) => {
      const e = document.getElementById(id);
      e.textContent = text;
      e.dataset.value = v === null ? '' : String(v);
    };
    set('cpu', cpu, format(cpu, 2));
    set('rss', rss, format(rss === null ? null : rss / 1048576, 0));
    const up = start === null ? null : Math.max(0, Date.now() / 1000 - start);
    const hms = up === null ? '–' : `${Math.floor(up / 3600)}h ${String(Math.floor(up / 60) % 60).padStart(2, '0')}m ${String(Math.floor(up) % 60).padStart(2, '0')}s`;
    set('uptime', up, hms);
    set('window', w.dt, format(w.dt, 1));
    set('updated', w.now.t, clock(w.now.t));
  }

  // ---- The poll loop. ----
  const history = [];  // scrapes, oldest first; history[0] is the window's start
  let updates = 0;
  function showError(message) {
    const e = document.getElementById('error');
    e.hidden = message === null;
    e.textContent = message || '';
  }
  function ingest(text) {
    const now = {t: Date.now() / 1000, data: parseMetrics(text), text};
    history.push(now);
    // Keep the newest scrape at or before the window's start, and everything after it.
    while (history.length > 2 && history[1].t <= now.t - WINDOW_S) history.shift();
    const then = history.length > 1 ? history[0] : null;
    const w = {now, then, dt: then ? now.t - then.t : 0};
    const models = modelsIn(now.data);
    if (models.size > 0) document.getElementById('empty')?.remove();
    for (const [key, m] of models) {
      const card = cards.get(key) || createCard(key, m.kind, m.model, m.version);
      card.el.classList.remove('gone');
      updateCard(card, m.kind === 'kserve' ? kserveView(w, m.sel) : generativeView(w, m.sel), now.t);
    }
    for (const [key, card] of cards) {
      if (!models.has(key)) card.el.classList.add('gone');  // unloaded: kept, greyed out
    }
    updateServer(w);
    updates += 1;
    document.body.dataset.updates = String(updates);
  }
  async function poll() {
    try {
      const resp = await fetch('/metrics', {cache: 'no-store'});
      if (!resp.ok) throw new Error(`/metrics answered ${resp.status}`);
      ingest(await resp.text());
      showError(null);
    } catch (e) {
      showError(`cannot read /metrics: ${e.message}`);
    }
    setTimeout(poll, INTERVAL_MS);
  }
  // `scrapes`: the raw /metrics texts the figures on screen were computed from (window start and
  // end), so a test can recompute them independently from exactly the same data.
  window.inferdDashboard = {
    parseMetrics, quantile, get updates() { return updates; },
    get scrapes() {
      return history.length > 1 ? {from: history[0].text, to: history[history.length - 1].text} : null;
    },
  };
  poll();
})();
