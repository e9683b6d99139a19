// The run browser's few behaviours: sort and filter tables, refresh live tables and progress,
// tick two runs to compare, load prompts when opened, run a replay, and show only differing aligned pairs.
"use strict";

function cellValue(row, i) {
  const cell = row.cells[i];
  if (!cell) return "";
  return cell.dataset.v !== undefined ? cell.dataset.v : cell.textContent.trim();
}

function compareValues(a, b) {
  const empty = v => v === "" || v === "-";
  if (empty(a) || empty(b)) return empty(a) - empty(b);  // blanks last
  const x = Number(a), y = Number(b);
  if (!isNaN(x) && !isNaN(y)) return x - y;
  return a.localeCompare(b, undefined, {numeric: true});
}

// A row of class "child" (a group's nested trials) belongs to the row before it:
// it moves and hides with that row, and is never sorted or filtered on its own.
function rowGroups(body) {
  const groups = [];
  for (const row of Array.from(body.rows)) {
    if (row.classList.contains("child") && groups.length) groups[groups.length - 1].push(row);
    else groups.push([row]);
  }
  return groups;
}

function sortTable(table) {
  const state = table.sortState;
  if (!state) return;
  const body = table.tBodies[0];
  const groups = rowGroups(body);
  groups.sort((g1, g2) => state.dir * compareValues(cellValue(g1[0], state.col), cellValue(g2[0], state.col)));
  groups.forEach(g => g.forEach(r => body.appendChild(r)));
}

function filterTable(table) {
  const text = document.querySelector(`.filter-text[data-table="${table.id}"]`);
  const needle = text ? text.value.trim().toLowerCase() : "";
  const selects = document.querySelectorAll(`select.filter[data-table="${table.id}"]`);
  let shown = 0;
  for (const [row, ...children] of rowGroups(table.tBodies[0])) {
    const words = [row, ...children].map(r => r.textContent.toLowerCase()).join(" ");
    let ok = !needle || words.includes(needle);
    for (const s of selects) {
      if (s.value && row.getAttribute("data-k-" + s.dataset.key) !== s.value) ok = false;
    }
    for (const r of [row, ...children]) r.hidden = !ok;
    if (ok) shown++;
  }
  table.dataset.shown = shown;
}

function setUpTables() {
  for (const table of document.querySelectorAll("table.sortable")) {
    table.querySelectorAll("th").forEach((th, col) => {
      if (!th.hasAttribute("data-sort")) return;
      th.classList.add("sort-key");
      th.addEventListener("click", () => {
        const s = table.sortState;
        table.sortState = {col, dir: s && s.col === col ? -s.dir : 1};
        table.querySelectorAll("th").forEach(h => h.removeAttribute("aria-sort"));
        th.setAttribute("aria-sort", table.sortState.dir > 0 ? "ascending" : "descending");
        sortTable(table);
      });
    });
  }
  for (const input of document.querySelectorAll(".filter-text, select.filter")) {
    const table = document.getElementById(input.dataset.table);
    if (table) for (const ev of ["input", "change"]) input.addEventListener(ev, () => filterTable(table));
  }
}

function setUpRefresh() {
  for (const body of document.querySelectorAll("tbody[data-refresh]")) {
    const table = body.closest("table");
    let last = body.innerHTML;
    const every = 1000 * parseFloat(body.dataset.every || "5");
    setInterval(async () => {
      try {
        const res = await fetch(body.dataset.refresh, {cache: "no-store"});
        if (!res.ok) return;
        const html = await res.text();
        if (html === last) return;
        last = html;
        const ticked = new Set(Array.from(body.querySelectorAll("input.pick:checked"), i => i.value));
        const open = new Set(Array.from(body.querySelectorAll("details[open] > summary"), s => s.textContent));
        body.innerHTML = html;
        body.querySelectorAll("input.pick").forEach(i => { i.checked = ticked.has(i.value); });
        body.querySelectorAll("details > summary").forEach(s => { if (open.has(s.textContent)) s.parentElement.open = true; });
        sortTable(table);
        filterTable(table);
        updatePicks();
      } catch (e) { /* the server may be restarting; try again next time */ }
    }, every);
  }
}

// The runs table: tick two runs, then compare them (the form sends run=A&run=B).
function updatePicks() {
  const button = document.getElementById("compare-picked");
  if (!button) return;
  const ticked = document.querySelectorAll("input.pick:checked").length;
  button.disabled = ticked !== 2;
  document.getElementById("picked-note").textContent =
    ticked === 2 ? "the two runs ticked" : `tick two runs (${ticked} ticked)`;
}

function setUpPicks() {
  document.addEventListener("change", e => { if (e.target.matches && e.target.matches("input.pick")) updatePicks(); });
  updatePicks();
}

// A running sweep's or group's progress: polled until its summary is written, then the page reloads.
function setUpProgress() {
  for (const box of document.querySelectorAll(".progress-box[data-url]")) {
    const every = 1000 * parseFloat(box.dataset.every || "2");
    const timer = setInterval(async () => {
      try {
        const res = await fetch(box.dataset.url, {cache: "no-store"});
        if (!res.ok) return;
        box.innerHTML = await res.text();
        const state = box.querySelector("[data-state]");
        if (state && state.dataset.state === "finished") {
          clearInterval(timer);
          location.reload();
        }
      } catch (e) { /* the server may be restarting; try again next time */ }
    }, every);
  }
}

function setUpPrompts() {
  for (const d of document.querySelectorAll("details.prompt")) {
    d.addEventListener("toggle", async () => {
      if (!d.open || d.dataset.loaded) return;
      d.dataset.loaded = "1";
      const slot = d.querySelector(".slot");
      try {
        const res = await fetch(d.dataset.url);
        slot.innerHTML = res.ok ? await res.text() : `<p class="damaged">${res.status}: ${res.statusText}</p>`;
      } catch (e) {
        slot.textContent = "could not load the prompt: " + e;
      }
    });
  }
}

function setUpReplay() {
  const button = document.getElementById("replay");
  if (!button) return;
  const out = document.getElementById("replay-result");
  button.addEventListener("click", async () => {
    button.disabled = true;
    out.className = "running";
    out.textContent = "replaying...";
    try {
      const res = await fetch(button.dataset.url, {method: "POST", headers: {"X-Simcore-View": "1"}});
      const data = await res.json();
      out.className = "outcome-" + data.outcome;
      out.textContent = data.outcome + ": " + data.detail;
      if (data.outcome === "differs") {
        out.textContent += `\nrecorded: ${data.recorded}\nreplayed: ${data.replayed}`;
      }
    } catch (e) {
      out.className = "outcome-error";
      out.textContent = "replay failed: " + e;
    } finally {
      button.disabled = false;
    }
  });
}

function setUpCompare() {
  const only = document.getElementById("only-diff");
  if (only) {
    only.addEventListener("change", () => {
      for (const row of document.querySelectorAll("#aligned tbody tr")) {
        row.hidden = only.checked && row.classList.contains("op-match") && !row.classList.contains("text-differs");
      }
    });
  }
  const tstar = document.getElementById("tstar");
  if (tstar && !location.hash) tstar.scrollIntoView({block: "center"});
}

document.addEventListener("DOMContentLoaded", () => {
  setUpTables();
  for (const input of document.querySelectorAll(".filter-text")) {  // a filter given in the address (?q=)
    const table = document.getElementById(input.dataset.table);
    if (table && input.value) filterTable(table);
  }
  setUpRefresh();
  setUpPicks();
  setUpProgress();
  setUpPrompts();
  setUpReplay();
  setUpCompare();
});
