// batkube report: zoom and pan of the time charts, a pod's details on hover
// and click, the sortable and filterable pod table. The project's own code,
// no library; everything it needs is in the page.
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('data').textContent);

  // Tables whose rows are in the page: a click on a header sorts them.
  function sortableTable(table) {
    if (!table) return;
    var ths = table.querySelectorAll('thead th');
    Array.prototype.forEach.call(ths, function (th, col) {
      th.addEventListener('click', function () {
        var desc = th.classList.contains('asc');
        Array.prototype.forEach.call(ths, function (h) { h.classList.remove('asc', 'desc'); });
        th.classList.add(desc ? 'desc' : 'asc');
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[col].textContent, y = b.cells[col].textContent;
          var nx = parseFloat(x), ny = parseFloat(y);
          var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
          return desc ? -c : c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), sortableTable);
  // How long a page takes to be ready is measured by experiments/report_scale.py.
  if (data.sweep) { performance.mark('batkube-ready'); return; }

  var W = data.W, t0 = data.t0, t1 = data.t1;
  var pods = data.pods, texts = data.texts, machines = data.machines;
  var P = { job: 0, name: 1, node: 2, created: 3, bound: 4, started: 5, finished: 6, attempts: 7,
            reason: 8, outcome: 9, group: 10, cls: 11, cpu: 12, mem: 13, queue: 14, qc: 15 };

  function fmt(x) {
    if (x === null || x === undefined) return '';
    return String(Math.round(x * 1000) / 1000);
  }
  function bytes(n) {
    var units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'], k = 0;
    while (n >= 1024 && k < units.length - 1 && n % 1024 === 0) { n /= 1024; k++; }
    return n + ' ' + units[k];
  }
  function tOf(x) { return t0 + x / W * (t1 - t0); }
  function wait(p) { return p[P.started] === null ? null : p[P.started] - p[P.created]; }

  // ---- zoom and pan: every time chart shares the x range [a, b] of 0..W.
  var views = Array.prototype.slice.call(document.querySelectorAll('svg.timeview'));
  var heights = views.map(function (v) { return v.viewBox.baseVal.height; });
  var gantt = document.getElementById('gantt');
  var hatch = document.getElementById('hatch');
  var range = [0, W];

  function niceTicks(a, b, want) {
    if (!(b > a)) return [a];
    var raw = (b - a) / want, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) { return m * mag; }).find(function (s) { return s >= raw; });
    var out = [];
    for (var t = Math.ceil(a / step) * step; t <= b + step * 1e-9; t += step) out.push(t);
    return out;
  }
  function drawAxis(svg) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var a = tOf(range[0]), b = tOf(range[1]);
    niceTicks(a, b, 8).forEach(function (t) {
      var f = (t - a) / (b - a) * 100, pct = f.toFixed(3) + '%';
      var l = document.createElementNS('http://www.w3.org/2000/svg', 'line');
      l.setAttribute('x1', pct); l.setAttribute('x2', pct); l.setAttribute('y1', 0); l.setAttribute('y2', 5);
      var s = document.createElementNS('http://www.w3.org/2000/svg', 'text');
      s.setAttribute('x', pct); s.setAttribute('y', 16); s.textContent = fmt(t);
      s.setAttribute('text-anchor', f < 2 ? 'start' : f > 98 ? 'end' : 'middle');
      svg.appendChild(l); svg.appendChild(s);
    });
  }
  function apply() {
    var w = range[1] - range[0];
    views.forEach(function (v, k) { v.setAttribute('viewBox', range[0] + ' 0 ' + w + ' ' + heights[k]); });
    if (hatch) {
      // Keep the hatching's lines as far apart on screen whatever the zoom.
      var pw = w / 150;
      hatch.setAttribute('width', pw);
      hatch.firstChild.setAttribute('d', 'M0,8 L' + pw + ',0');
    }
    Array.prototype.forEach.call(document.querySelectorAll('svg.timeaxis'), drawAxis);
    var r = document.getElementById('zoom-range');
    if (r) r.textContent = w < W ? 'showing ' + fmt(tOf(range[0])) + ' s to ' + fmt(tOf(range[1])) + ' s' : '';
  }
  function zoomAt(center, factor) {
    var w = Math.min(W, Math.max(W / 1e6, (range[1] - range[0]) * factor));
    var a = center - (center - range[0]) * (w / (range[1] - range[0]));
    a = Math.min(Math.max(a, 0), W - w);
    range = [a, a + w];
    apply();
  }
  function xAt(view, clientX) {
    var r = view.getBoundingClientRect();
    return range[0] + (clientX - r.left) / r.width * (range[1] - range[0]);
  }
  views.concat(Array.prototype.slice.call(document.querySelectorAll('svg.timeaxis'))).forEach(function (v) {
    v.addEventListener('wheel', function (e) {
      // On a chart the wheel scrolls the page unless Ctrl is held (a pinch
      // sends Ctrl+wheel); on an axis it always zooms.
      if (!e.ctrlKey && !e.metaKey && !v.classList.contains('timeaxis')) return;
      e.preventDefault();
      zoomAt(xAt(v, e.clientX), Math.exp(e.deltaY * 0.002));
    }, { passive: false });
  });
  // ---- colour by outcome or by queue (the bars carry both classes).
  Array.prototype.forEach.call(document.querySelectorAll('input[name="colour-by"]'), function (r) {
    r.addEventListener('change', function () {
      var byQueue = r.value === 'queue' && r.checked;
      if (gantt) gantt.classList.toggle('by-queue', byQueue);
      var lo = document.getElementById('legend-outcome'), lq = document.getElementById('legend-queue');
      if (lo) lo.hidden = byQueue;
      if (lq) lq.hidden = !byQueue;
    });
  });
  function button(id, f) { var b = document.getElementById(id); if (b) b.addEventListener('click', f); }
  button('zoom-in', function () { zoomAt((range[0] + range[1]) / 2, 0.5); });
  button('zoom-out', function () { zoomAt((range[0] + range[1]) / 2, 2); });
  button('zoom-reset', function () { range = [0, W]; apply(); });

  var drag = null, moved = false;
  if (gantt) {
    gantt.addEventListener('mousedown', function (e) {
      if (e.button !== 0) return;
      drag = { x: e.clientX, range: range.slice(), width: gantt.getBoundingClientRect().width };
      moved = false;
    });
    window.addEventListener('mousemove', function (e) {
      if (!drag) return;
      var dx = e.clientX - drag.x;
      if (Math.abs(dx) > 3) { moved = true; gantt.classList.add('dragging'); }
      if (!moved) return;
      var w = drag.range[1] - drag.range[0];
      var a = drag.range[0] - dx / drag.width * w;
      a = Math.min(Math.max(a, 0), W - w);
      range = [a, a + w];
      apply();
    });
    window.addEventListener('mouseup', function () { drag = null; gantt.classList.remove('dragging'); });
    gantt.addEventListener('dblclick', function (e) { zoomAt(xAt(gantt, e.clientX), 0.5); });
  }

  // ---- where each pod's bar is: read from the rects, or from the paths a
  // large run is drawn with (subpath k of a path is the bar of the k-th pod
  // in its data-i); the bars under the pointer are then found by row.
  var SVGNS = 'http://www.w3.org/2000/svg';
  var barX = new Float64Array(pods.length).fill(NaN), barY = new Float64Array(pods.length),
      barW = new Float64Array(pods.length), barH = new Float64Array(pods.length);
  var rowsOfBars = [], pathMode = false, overlay = null;
  var rh = gantt ? +gantt.getAttribute('data-rh') : 1;
  function place(i, x, y, w, h) {
    barX[i] = x; barY[i] = y; barW[i] = w; barH[i] = h;
    var row = Math.floor(y / rh);
    (rowsOfBars[row] = rowsOfBars[row] || []).push(i);
  }
  if (gantt) {
    Array.prototype.forEach.call(gantt.querySelectorAll('rect.b'), function (r) {
      place(+r.getAttribute('data-i'), +r.getAttribute('x'), +r.getAttribute('y'),
            +r.getAttribute('width'), +r.getAttribute('height'));
    });
    Array.prototype.forEach.call(gantt.querySelectorAll('path.b'), function (path) {
      pathMode = true;
      var ids = path.getAttribute('data-i').split(' ');
      var v = path.getAttribute('d').match(/-?\d+(?:\.\d+)?/g); // x, y, w, h, -w per bar
      for (var k = 0; k < ids.length; k++) place(+ids[k], +v[5 * k], +v[5 * k + 1], +v[5 * k + 2], +v[5 * k + 3]);
    });
    overlay = document.createElementNS(SVGNS, 'g');
    overlay.setAttribute('id', 'overlay');
    gantt.appendChild(overlay);
  }
  function hasBar(i) { return !isNaN(barX[i]); }
  // The pod whose bar is under the pointer (within 3 pixels across), or null.
  function barAt(clientX, clientY) {
    var r = gantt.getBoundingClientRect();
    var ux = xAt(gantt, clientX), uy = (clientY - r.top) * (gantt.viewBox.baseVal.height / r.height);
    var row = rowsOfBars[Math.floor(uy / rh)];
    if (!row) return null;
    var slack = 3 * (range[1] - range[0]) / r.width, best = null, bestD = Infinity;
    row.forEach(function (i) {
      if (uy < barY[i] - 0.5 || uy > barY[i] + barH[i] + 0.5) return;
      var d = ux < barX[i] ? barX[i] - ux : Math.max(0, ux - barX[i] - barW[i]);
      if (d < bestD) { bestD = d; best = i; }
    });
    return bestD <= slack ? best : null;
  }
  function podAt(e) {
    var t = e.target;
    if (t.tagName === 'rect' && t.classList.contains('b')) return +t.getAttribute('data-i');
    if (pathMode) return barAt(e.clientX, e.clientY);
    return null;
  }
  function highlight(i, cls) {
    if (!overlay || !hasBar(i)) return;
    var r = document.createElementNS(SVGNS, 'rect');
    r.setAttribute('class', cls);
    r.setAttribute('data-i', i);
    r.setAttribute('x', barX[i]); r.setAttribute('y', barY[i]);
    r.setAttribute('width', barW[i]); r.setAttribute('height', barH[i]);
    overlay.appendChild(r);
  }

  var members = null;
  function gangOf(i) {
    var g = pods[i][P.group];
    if (!g) return [];
    if (!members) {
      members = {};
      pods.forEach(function (p, k) { if (p[P.group]) (members[p[P.group]] = members[p[P.group]] || []).push(k); });
    }
    return members[g] || [];
  }
  function nodeName(p) { return p[P.node] >= 0 ? machines[p[P.node]] : ''; }

  // ---- the decision trail (--explain): a pod's attempts, found on first use.
  var trail = data.trail || [], trailOf = null;
  var T = { pod: 0, time: 1, n: 2, node: 3, reason: 4, passed: 5, refused: 6, plugins: 7, scores: 8 };
  function attemptsOf(i) {
    if (!trailOf) {
      trailOf = {};
      trail.forEach(function (a, k) { (trailOf[a[T.pod]] = trailOf[a[T.pod]] || []).push(k); });
    }
    return trailOf[i] || [];
  }
  function trailWord(i) {
    var mine = attemptsOf(i);
    if (!mine.length) return data.explained ? 'none recorded' : '';
    // The scheduler's count (it does not write an attempt that repeats the last).
    var n = trail[mine[mine.length - 1]][T.n];
    if (n === null || n < mine.length) n = mine.length;
    return n + (n === 1 ? ' attempt' : ' attempts');
  }
  var MAX_TRAIL_ROWS = 40;
  // One attempt: what was chosen or why not, then a row per node: the
  // filters' verdict, each plugin's final score (raw in the tooltip), the total.
  function attemptBlock(a, k, before) {
    var div = document.createElement('div');
    div.className = 'attempt';
    if (before !== null && a[T.n] !== null && a[T.n] > before + 1) {
      var gap = document.createElement('p');
      gap.className = 'repeats';
      gap.textContent = 'Attempt' + (a[T.n] > before + 2 ? 's ' + (before + 1) + '\u2013' + (a[T.n] - 1) : ' ' + (before + 1)) +
        ': as attempt ' + before + ' (not written again)';
      div.appendChild(gap);
    }
    var h = document.createElement('h4');
    var node = texts[a[T.node]], reason = texts[a[T.reason]];
    h.textContent = 'Attempt ' + (a[T.n] !== null ? a[T.n] : k + 1) + ' at ' + fmt(a[T.time]) + ' s: ' +
      (node ? 'bound to ' + node : 'not scheduled' + (reason ? ': ' + reason : ''));
    div.appendChild(h);
    var plugins = a[T.plugins], np = plugins.length;
    var score = {};
    a[T.scores].forEach(function (r) { score[r[0]] = r; });
    var rows = [];
    a[T.passed].forEach(function (n) { rows.push({ n: n, ok: true, s: score[n] }); });
    a[T.refused].forEach(function (r) { rows.push({ n: r[0], ok: false, why: texts[r[1]] + ': ' + texts[r[2]] }); });
    rows.sort(function (x, y) {
      var cx = texts[x.n] === node ? 0 : x.ok ? 1 : 2, cy = texts[y.n] === node ? 0 : y.ok ? 1 : 2;
      if (cx !== cy) return cx - cy;
      var sx = x.s ? x.s[1] : -1, sy = y.s ? y.s[1] : -1;
      return sy - sx || texts[x.n].localeCompare(texts[y.n], undefined, { numeric: true });
    });
    var t = document.createElement('table');
    t.className = 'trail';
    var head = t.createTHead().insertRow();
    ['node', 'filters'].concat(plugins.map(function (p) { return texts[p]; }), np ? ['total'] : [])
      .forEach(function (x) { var th = document.createElement('th'); th.textContent = x; head.appendChild(th); });
    var body = t.createTBody();
    rows.slice(0, MAX_TRAIL_ROWS).forEach(function (r) {
      var tr = body.insertRow();
      if (texts[r.n] === node) tr.className = 'chosen';
      else if (!r.ok) tr.className = 'refused';
      tr.insertCell().textContent = texts[r.n];
      tr.insertCell().textContent = r.ok ? 'passed' : r.why;
      for (var q = 0; q < np; q++) {
        var td = tr.insertCell();
        if (r.s) { td.textContent = r.s[2 + np + q]; td.title = 'raw ' + r.s[2 + q]; }
      }
      if (np) tr.insertCell().textContent = r.s ? r.s[1] : '';
    });
    div.appendChild(t);
    if (rows.length > MAX_TRAIL_ROWS) {
      var more = document.createElement('p');
      more.textContent = (rows.length - MAX_TRAIL_ROWS) + ' more nodes (decisions.jsonl has them)';
      div.appendChild(more);
    }
    return div;
  }
  function brief(i) {
    var p = pods[i];
    return p[1] + ' on ' + (nodeName(p) || '(no node)') + ': ' + fmt(p[P.started] !== null ? p[P.started] : p[P.bound]) +
      ' s to ' + (p[P.finished] === null ? 'the end' : fmt(p[P.finished]) + ' s') + ', ' + data.classes[p[P.cls]];
  }
  function select(i, reveal) {
    if (overlay) overlay.textContent = '';
    var p = pods[i];
    gangOf(i).forEach(function (k) { if (k !== i) highlight(k, 'gsel'); });
    highlight(i, 'sel');
    var rows = [
      ['pod', p[P.name]], ['job', p[P.job]], ['node', nodeName(p) || '(never bound)'],
      ['created', fmt(p[P.created])], ['bound', fmt(p[P.bound])], ['started', fmt(p[P.started])],
      ['finished', fmt(p[P.finished])], ['wait', fmt(wait(p))],
      ['ran', p[P.started] !== null && p[P.finished] !== null ? fmt(p[P.finished] - p[P.started]) : ''],
      ['attempts', String(p[P.attempts])], ['last unschedulable reason', texts[p[P.reason]] || '\u2014'],
      ['outcome', texts[p[P.outcome]] || '(none: the run ended first)'],
      ['cpu request', p[P.cpu] + 'm'], ['memory request', bytes(p[P.mem])],
      ['queue', texts[p[P.queue]] || '\u2014'],
      ['decision trail', trailWord(i) || 'not recorded (run with --explain)']
    ];
    var body = document.getElementById('details-body');
    body.textContent = '';
    var h = document.createElement('h3');
    h.textContent = 'Pod ' + p[P.name];
    body.appendChild(h);
    var t = document.createElement('table');
    rows.forEach(function (kv) {
      var tr = t.insertRow(), th = document.createElement('th'), td = tr.insertCell();
      th.textContent = kv[0]; tr.insertBefore(th, td); td.textContent = kv[1];
    });
    body.appendChild(t);
    var mine = attemptsOf(i);
    if (mine.length) {
      var sec = document.createElement('div');
      sec.id = 'trail';
      var th3 = document.createElement('h3');
      th3.textContent = 'Decision trail';
      sec.appendChild(th3);
      mine.forEach(function (k, n) {
        sec.appendChild(attemptBlock(trail[k], n, n ? trail[mine[n - 1]][T.n] : null));
      });
      body.appendChild(sec);
    }
    var gang = gangOf(i);
    if (gang.length) {
      var gp = document.createElement('p');
      gp.textContent = 'Gang ' + texts[p[P.group]] + ', ' + gang.length + ' pods: ';
      gang.forEach(function (k, n) {
        var a = document.createElement('a');
        a.textContent = pods[k][P.name] + ' (' + (nodeName(pods[k]) || 'no node') + ')';
        a.addEventListener('click', function () { select(k, true); });
        if (n) gp.appendChild(document.createTextNode(', '));
        gp.appendChild(a);
      });
      body.appendChild(gp);
    }
    document.getElementById('details').hidden = false;
    markRow(i);
    if (reveal && hasBar(i)) revealBar(i);
  }
  function revealBar(i) {
    var x = barX[i], w = barW[i];
    if (x + w < range[0] || x > range[1]) {
      var span = range[1] - range[0];
      var a = Math.min(Math.max(x + w / 2 - span / 2, 0), W - span);
      range = [a, a + span];
      apply();
    }
    var scroll = document.getElementById('gantt-scroll');
    var y = barY[i];
    if (y < scroll.scrollTop || y > scroll.scrollTop + scroll.clientHeight - 20) {
      scroll.scrollTop = Math.max(0, y - scroll.clientHeight / 2);
    }
  }
  button('details-close', function () {
    document.getElementById('details').hidden = true;
    if (overlay) overlay.textContent = '';
  });

  var tip = document.getElementById('tip');
  if (gantt) {
    gantt.addEventListener('click', function (e) {
      if (moved) return;
      var i = e.target.classList.contains('agg') ? +e.target.getAttribute('data-i') : podAt(e);
      if (i !== null) select(i, false);
    });
    gantt.addEventListener('mousemove', function (e) {
      if (drag) { tip.hidden = true; return; }
      var agg = e.target.classList.contains('agg'), i = agg ? null : podAt(e);
      if (!agg && i === null) { tip.hidden = true; return; }
      tip.textContent = agg
        ? e.target.getAttribute('data-n') + ' pods too short to draw at this size (a click shows the first)'
        : brief(i);
      tip.style.left = (e.clientX + 12) + 'px';
      tip.style.top = (e.clientY + 12) + 'px';
      tip.hidden = false;
    });
    gantt.addEventListener('mouseleave', function () { tip.hidden = true; });
  }

  // ---- the pod table, filled from the data: a page of rows at a time.
  var PAGE = 1000;
  var table = document.getElementById('pods');
  var order = pods.map(function (_, i) { return i; });
  var shown = order, page = 0, sortCol = -1, sortDesc = false, hay = null;
  function cell(i, c) {
    var p = pods[i];
    switch (c) {
      case 0: return p[P.job];
      case 1: return p[P.name];
      case 2: return nodeName(p);
      case 3: return p[P.created];
      case 4: return p[P.bound];
      case 5: return p[P.started];
      case 6: return p[P.finished];
      case 7: return wait(p);
      case 8: return p[P.attempts];
      case 9: return texts[p[P.reason]];
      case 10: return texts[p[P.outcome]];
      case 11: return texts[p[P.group]];
      case 12: return texts[p[P.queue]];
      case 13: return trailWord(i);
      default: return '';
    }
  }
  function refilter() {
    var q = document.getElementById('pod-filter').value.trim().toLowerCase();
    var cls = document.getElementById('pod-outcome').value;
    if (q && !hay) {
      hay = pods.map(function (_, i) {
        var s = [];
        for (var c = 0; c < 13; c++) s.push(c >= 3 && c <= 8 ? fmt(cell(i, c)) : cell(i, c));
        return s.join('\u0001').toLowerCase();
      });
    }
    shown = order.filter(function (i) {
      return (cls === '' || pods[i][P.cls] === +cls) && (!q || hay[i].indexOf(q) >= 0);
    });
    page = 0;
    render();
  }
  function render() {
    var body = table.tBodies[0];
    body.textContent = '';
    var from = page * PAGE, to = Math.min(shown.length, from + PAGE);
    var frag = document.createDocumentFragment();
    for (var k = from; k < to; k++) {
      var i = shown[k], p = pods[i], tr = document.createElement('tr');
      tr.setAttribute('data-i', i);
      for (var c = 0; c < 14; c++) {
        var v = cell(i, c), td = document.createElement('td');
        td.textContent = (c >= 3 && c <= 8) ? fmt(v) : (v || '');
        tr.appendChild(td);
      }
      frag.appendChild(tr);
    }
    body.appendChild(frag);
    document.getElementById('pod-count').textContent = shown.length === pods.length
      ? pods.length + ' pods' + (shown.length > PAGE ? ', rows ' + (from + 1) + ' to ' + to : '')
      : shown.length + ' of ' + pods.length + ' pods' + (shown.length > PAGE ? ', rows ' + (from + 1) + ' to ' + to : '');
    document.getElementById('pod-prev').disabled = page === 0;
    document.getElementById('pod-next').disabled = to >= shown.length;
  }
  function markRow(i) {
    if (!table) return;
    Array.prototype.forEach.call(table.querySelectorAll('tr.sel'), function (r) { r.classList.remove('sel'); });
    var tr = table.querySelector('tbody tr[data-i="' + i + '"]');
    if (tr) tr.classList.add('sel');
  }
  if (table) {
    var ths = table.querySelectorAll('thead th');
    Array.prototype.forEach.call(ths, function (th, c) {
      th.addEventListener('click', function () {
        sortDesc = sortCol === c ? !sortDesc : false;
        sortCol = c;
        Array.prototype.forEach.call(ths, function (h) { h.classList.remove('asc', 'desc'); });
        th.classList.add(sortDesc ? 'desc' : 'asc');
        var numeric = c >= 3 && c <= 8;
        order.sort(function (a, b) {
          var x = cell(a, c), y = cell(b, c);
          var ex = x === null || x === '' || x === undefined, ey = y === null || y === '' || y === undefined;
          if (ex || ey) return ex === ey ? a - b : (ex ? 1 : -1); // empty cells last either way
          var r = numeric ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true });
          return (sortDesc ? -r : r) || a - b;
        });
        refilter();
      });
    });
    document.getElementById('pod-filter').addEventListener('input', refilter);
    document.getElementById('pod-outcome').addEventListener('change', refilter);
    button('pod-prev', function () { page = Math.max(0, page - 1); render(); });
    button('pod-next', function () { page += 1; render(); });
    table.tBodies[0].addEventListener('click', function (e) {
      var tr = e.target.closest('tr');
      if (tr) select(+tr.getAttribute('data-i'), true);
    });
    render();
  }
  apply();
  performance.mark('batkube-ready');
})();
