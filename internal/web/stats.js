// Histogram drawing for /stats?format=html&histogram_buckets=detailed.
//
// The page calls renderHistogram once per histogram with the detail object of
// the JSON detailed layout:
//   {name, totals: [{lower_bound, width, count}], intervals: [...],
//    percentiles: [{cumulative, interval}]}
// Each bin becomes a column: its cumulative count, a bar scaled to the largest
// bin (the narrow orange bar is the count since the last flush), and the
// bin's lower bound.

/**
 * Appends a drawing of one histogram to parent.
 * @param {!Element} parent where the drawing goes
 * @param {!Array<number>} supportedPercentiles percentile labels, in the
 *     order of detail.percentiles
 * @param {!Object} detail one histogram in the detailed JSON layout
 */
function renderHistogram(parent, supportedPercentiles, detail) {
  const element = (tag, className, text) => {
    const e = document.createElement(tag);
    e.className = className;
    if (text !== undefined) {
      e.textContent = text;
    }
    return e;
  };
  const section = element('div', 'histogram');
  section.appendChild(element('div', 'histogram-name', detail.name));
  parent.appendChild(section);

  const totals = detail.totals || [];
  if (totals.length === 0) {
    section.appendChild(element('div', 'histogram-percentiles', 'No recorded values'));
    return;
  }
  // Six significant digits, as the text format's quantiles read.
  const short = (v) => typeof v === 'number' ? String(Number(v.toPrecision(6))) : String(v);
  const percentiles = (detail.percentiles || []).map(
      (p, i) => 'P' + supportedPercentiles[i] + ': ' + short(p.cumulative));
  section.appendChild(element('div', 'histogram-percentiles', percentiles.join('  ')));

  const intervalCounts = new Map();
  for (const bin of detail.intervals || []) {
    intervalCounts.set(bin.lower_bound, bin.count);
  }
  const largest = Math.max(...totals.map((bin) => bin.count));
  const height = (count) => Math.round(100 * count / largest) + 'px';

  const bars = element('div', 'histogram-body');
  for (const bin of totals) {
    const interval = intervalCounts.get(bin.lower_bound) || 0;
    const column = element('div', 'histogram-column');
    column.title = '[' + bin.lower_bound + ', ' + (bin.lower_bound + bin.width) + '): ' +
        bin.count + ' total, ' + interval + ' since the last flush';
    column.appendChild(element('span', 'histogram-count', String(bin.count)));
    const pair = element('div', 'histogram-bars');
    const total = element('div', 'histogram-bar');
    total.style.height = height(bin.count);
    pair.appendChild(total);
    if (interval > 0) {
      const recent = element('div', 'histogram-bar interval');
      recent.style.height = height(interval);
      pair.appendChild(recent);
    }
    column.appendChild(pair);
    column.appendChild(element('span', 'histogram-bound', String(bin.lower_bound)));
    bars.appendChild(column);
  }
  section.appendChild(bars);
}
