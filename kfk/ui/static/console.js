// kfk console: the live parts of the pages. Everything else is server-rendered and works without this file.
"use strict";

const refreshMs = Number(document.body.dataset.refreshMs || 2000);
// The session's CSRF token: the console refuses any request but GET and HEAD without it (X-CSRF-Token for fetch()).
const csrfToken = document.querySelector('meta[name="csrf-token"]')?.content || "";

async function getJson(url) {
  const response = await fetch(url, { headers: { Accept: "application/json", "X-CSRF-Token": csrfToken } });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    throw new Error(body.error || `${url}: HTTP ${response.status}`);
  }
  return response.json();
}

function cell(text, numeric) {
  const td = document.createElement("td");
  if (numeric) td.className = "num";
  td.textContent = text === null || text === undefined ? "-" : String(text);
  return td;
}

function replaceRows(tbody, rows) {
  tbody.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    tr.append(...cells);
    return tr;
  }));
}

function every(task) {
  const run = () => task().catch((error) => console.warn(error.message)).finally(() => setTimeout(run, refreshMs));
  run();
}

// What a live figure left out, and why, shown under it (empty when nothing is missing).
function describeMissing(sample) {
  const lines = sample.notes.map((note) => `${note}.`);
  const missing = sample.missing;
  if (missing.length) {
    const shown = missing.slice(0, 5).map((entry) => `${entry.topic}-${entry.partition}: ${entry.reason}`);
    const more = missing.length > shown.length ? `, and ${missing.length - shown.length} more` : "";
    lines.push(`Not counted: ${missing.length} partition(s) (${shown.join("; ")}${more}).`);
  }
  return lines.join(" ");
}

// Records/s between two samples, topic by topic: only topics complete in both count, so a partition that stops
// answering (or comes back) during an incident is neither a drop nor a burst of traffic.
function recordsPerSecond(previous, current) {
  const seconds = (current.time_ms - previous.time_ms) / 1000;
  if (seconds <= 0) return 0;
  let records = 0;
  for (const [topic, offsets] of Object.entries(current.per_topic)) {
    if (topic in previous.per_topic) records += Math.max(0, offsets - previous.per_topic[topic]);
  }
  return records / seconds;
}

// Overview: records/s from the change of the log end offsets between two samples, drawn as a line.
function throughputChart(svg) {
  const samples = [];
  const figure = document.getElementById("throughput");
  const note = document.getElementById("throughput-note");
  every(async () => {
    let sample;
    try {
      sample = await getJson(svg.dataset.source);
    } catch (error) {
      note.textContent = `No sample: ${error.message}`;
      throw error;
    }
    note.textContent = describeMissing(sample);
    samples.push(sample);
    if (samples.length > 61) samples.shift();
    const rates = [];
    for (let i = 1; i < samples.length; i++) rates.push(recordsPerSecond(samples[i - 1], samples[i]));
    if (!rates.length) return;
    if (figure) figure.textContent = Math.round(rates[rates.length - 1]).toLocaleString();
    const top = Math.max(1, ...rates);
    const step = 600 / 60;
    const points = rates.map((rate, i) => `${(600 - (rates.length - 1 - i) * step).toFixed(1)},${(118 - (rate / top) * 110).toFixed(1)}`);
    let line = svg.querySelector("polyline");
    if (!line) {
      line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
      svg.append(line);
    }
    line.setAttribute("points", points.join(" "));
    document.getElementById("throughput-peak").textContent = `peak ${Math.round(top).toLocaleString()} records/s`;
  });
}

// Consumer group: lag per partition and the total, live.
function groupLag(total) {
  const tbody = document.getElementById("lag-rows");
  every(async () => {
    const lag = await getJson(total.dataset.source);
    total.textContent = lag.total_lag;
    replaceRows(tbody, lag.partitions.map((row) => [
      cell(row.topic), cell(row.partition, true), cell(row.committed_offset, true), cell(row.log_end_offset, true),
      cell(row.lag, true), cell(row.member || ""),
    ]));
  });
}

// Reassignments in progress, live.
function reassignments(table) {
  const tbody = document.getElementById("in-progress-rows");
  every(async () => {
    const data = await getJson(table.dataset.source);
    if (!data.in_progress.length) {
      const td = cell("No reassignment in progress.");
      td.colSpan = 5;
      replaceRows(tbody, [[td]]);
      return;
    }
    replaceRows(tbody, data.in_progress.map((row) => [
      cell(row.topic), cell(row.partition, true), cell(row.replicas.join(",")), cell(row.adding.join(",")),
      cell(row.removing.join(",")),
    ]));
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const chart = document.getElementById("throughput-chart");
  if (chart) throughputChart(chart);
  const total = document.getElementById("total-lag");
  if (total) groupLag(total);
  const table = document.getElementById("in-progress");
  if (table) reassignments(table);
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
});

// The message browser's live tail: server-sent events of records appended after it started, newest first; the
// table keeps the last TAIL_ROWS rows, and closing the page (or Stop) ends the tail on the server too.
const TAIL_ROWS = 300;

function liveTail(button) {
  const section = document.getElementById("tail");
  const status = document.getElementById("tail-status");
  const tbody = section.querySelector("tbody");
  let source = null;
  let received = 0;
  const stop = (message) => {
    if (source) source.close();
    source = null;
    status.textContent = message;
    button.disabled = false;
  };
  button.addEventListener("click", () => {
    const query = new URLSearchParams(new FormData(button.form));
    for (const name of ["search", "max_scanned", "from_time", "to_time"]) query.delete(name);
    const url = `${document.body.dataset.prefix || ""}/api/topics/${encodeURIComponent(button.dataset.topic)}/tail?${query}`;
    section.hidden = false;
    button.disabled = true;
    received = 0;
    status.textContent = "Live tail: connecting…";
    source = new EventSource(url);
    source.addEventListener("ready", (event) => {
      if (event.data) status.textContent = "Live tail open: waiting for new records…";
    });
    source.addEventListener("message", (event) => {
      const batch = JSON.parse(event.data);
      received += batch.records.length;
      status.textContent = `Live tail open: ${received} record(s) received`;
      for (const record of batch.records) {
        const tr = document.createElement("tr");
        const pre = (rendered) => {
          const td = document.createElement("td");
          const block = document.createElement("pre");
          block.className = `value ${rendered.kind}`;
          block.textContent = rendered.text;
          td.append(block);
          return td;
        };
        const headers = cell(record.headers.map(([name, value]) => `${name}: ${value}`).join("\n"));
        tr.append(cell(record.partition, true), cell(record.offset, true),
          cell(new Date(record.timestamp).toISOString()), pre(record.key), pre(record.value), headers);
        tbody.prepend(tr);
      }
      while (tbody.rows.length > TAIL_ROWS) tbody.deleteRow(-1);
    });
    source.addEventListener("end", (event) => stop(`Live tail stopped: ${JSON.parse(event.data)}.`));
    source.addEventListener("error", () => stop("Live tail stopped: the console refused it or the connection closed" +
      " (at most a few tails may be open at once)."));
  });
  document.getElementById("tail-stop").addEventListener("click", () => stop("Live tail stopped."));
}

document.addEventListener("DOMContentLoaded", () => {
  const tail = document.getElementById("tail-start");
  if (tail) liveTail(tail);
});
