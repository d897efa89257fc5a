// Live view of /stats?format=active-html.
//
// Every few seconds the page fetches stats?format=json&usedonly (with the
// filter and type chosen in the page), remembers each stat's last value and
// counts how many polls saw it change. The table shows the stats that change
// most often first (ties by name). Changing the filter or type starts the
// counting afresh; changing the count or the interval takes effect at once.
(function() {
  'use strict';

  const byId = (id) => document.getElementById(id);
  const filterInput = byId('param-1-stats-filter');
  const typeSelect = byId('param-1-stats-type');
  const countInput = byId('active-max-display-count');
  const intervalInput = byId('active-update-interval');
  const status = byId('active-status');
  const content = byId('active-content');

  // name -> {value: string, changes: number}
  let tracked = new Map();
  // Bumped when filter or type changes, so that replies to older queries are
  // dropped.
  let generation = 0;
  let timer = 0;

  const positive = (input, fallback) => {
    const v = Number(input.value);
    return Number.isFinite(v) && v > 0 ? v : fallback;
  };

  const statsURL = () => {
    let url = 'stats?format=json&usedonly';
    if (filterInput.value !== '') {
      url += '&filter=' + encodeURIComponent(filterInput.value);
    }
    if (typeSelect.value !== 'All') {
      url += '&type=' + encodeURIComponent(typeSelect.value);
    }
    return url;
  };

  // Flattens the JSON reply into [name, value text] pairs. Histograms count
  // as one value: their quantiles in the text layout.
  const pairs = (reply) => {
    const out = [];
    for (const stat of reply.stats || []) {
      if ('name' in stat) {
        out.push([stat.name, String(stat.value)]);
        continue;
      }
      const h = stat.histograms;
      for (const q of (h && h.computed_quantiles) || []) {
        const text = q.values.map((v, i) =>
          'P' + h.supported_quantiles[i] + '(' + v.interval + ',' + v.cumulative + ')');
        out.push([q.name, text.join(' ')]);
      }
    }
    return out;
  };

  const record = (reply) => {
    for (const [name, value] of pairs(reply)) {
      const seen = tracked.get(name);
      if (seen === undefined) {
        tracked.set(name, {value: value, changes: 0});
      } else if (seen.value !== value) {
        seen.value = value;
        seen.changes++;
      }
    }
  };

  const cell = (row, text, className) => {
    const td = row.insertCell();
    td.textContent = text;
    if (className) {
      td.className = className;
    }
  };

  const render = () => {
    const rows = Array.from(tracked, ([name, t]) => ({name: name, value: t.value, changes: t.changes}));
    rows.sort((a, b) => b.changes - a.changes || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const table = document.createElement('table');
    table.className = 'active-table';
    const head = table.createTHead().insertRow();
    for (const title of ['Changes', 'Value', 'Name']) {
      const th = document.createElement('th');
      th.textContent = title;
      head.appendChild(th);
    }
    const body = table.createTBody();
    for (const r of rows.slice(0, Math.floor(positive(countInput, 50)))) {
      const row = body.insertRow();
      row.dataset.stat = r.name;
      cell(row, String(r.changes), 'active-number active-changes');
      cell(row, r.value, 'active-number active-value');
      cell(row, r.name, 'active-name');
    }
    content.replaceChildren(table);
  };

  const schedule = () => {
    clearTimeout(timer);
    timer = setTimeout(poll, positive(intervalInput, 5) * 1000);
  };

  async function poll() {
    const asked = generation;
    clearTimeout(timer);
    try {
      const response = await fetch(statsURL());
      const body = await response.text();
      if (asked !== generation) {
        return;
      }
      if (!response.ok) {
        throw new Error(response.status + ': ' + body.trim());
      }
      record(JSON.parse(body));
      render();
      status.textContent = 'Updated ' + new Date().toLocaleTimeString() + '; ' +
          tracked.size + ' stats tracked.';
    } catch (err) {
      if (asked !== generation) {
        return;
      }
      status.textContent = 'Update failed: ' + err.message;
    }
    schedule();
  }

  const restart = () => {
    generation++;
    tracked = new Map();
    content.replaceChildren();
    poll();
  };

  filterInput.addEventListener('change', restart);
  typeSelect.addEventListener('change', restart);
  countInput.addEventListener('input', render);
  intervalInput.addEventListener('input', schedule);
  poll();
})();
