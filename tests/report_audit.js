// The accessibility audit of a report page (tests/browser.py `audit`), run after axe-core in headless
// Chromium. It opens every <details> (so what they hold is audited too), visits every element the
// keyboard reaches (each must take the focus and show a focus ring of at least 2 px), notes what could
// trap or bypass the keyboard (scripts, inline handlers, positive tabindex, a <summary> that is not the
// first child of its <details>), then runs axe-core's default rules (WCAG 2.0-2.2 A and AA and its best
// practices) and writes all of it into the page as JSON, which --dump-dom returns.
window.addEventListener('load', () => {
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' ' +
                     (el.textContent || '').trim().slice(0, 60);
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const reachable = [...document.querySelectorAll('a[href], summary, button, input, select, textarea, [tabindex]')];
  const noFocus = [], noRing = [];
  for (const el of reachable) {
    el.focus();
    if (document.activeElement !== el) { noFocus.push(name(el)); continue; }
    const style = getComputedStyle(el);
    if (style.outlineStyle === 'none' || parseFloat(style.outlineWidth) < 2) noRing.push(name(el));
  }
  if (document.activeElement) document.activeElement.blur();
  const keyboard = {
    reachable: reachable.length, no_focus: noFocus, no_ring: noRing,
    positive_tabindex: [...document.querySelectorAll('[tabindex]')].filter(e => e.tabIndex > 0).map(name),
    scripts: document.querySelectorAll('script:not([data-audit])').length,
    handlers: [...document.querySelectorAll('*')]
      .filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).map(name),
    summaries_outside_details: [...document.querySelectorAll('summary')]
      .filter(s => s.parentElement.tagName !== 'DETAILS' || s.parentElement.firstElementChild !== s).map(name),
  };
  const write = data => {
    const out = document.createElement('pre');
    out.id = 'audit-results';
    out.textContent = JSON.stringify(data);
    document.body.appendChild(out);
  };
  axe.run(document).then(r => write({
    version: axe.version, keyboard, passes: r.passes.length,
    violations: r.violations.map(v => ({
      id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.map(n => ({target: n.target, html: n.html.slice(0, 300), summary: n.failureSummary})),
    })),
  }), e => write({error: String(e), keyboard}));
});
