"""DOM → `Element` extraction: what a policy can point at, with boxes in page (CSS) pixels.

The page-side script keeps elements that are interactive (form controls, links, buttons, labels,
ARIA widgets such as tabs, anything with an `onclick` attribute or a pointer cursor) or that carry
their own visible text (so a policy can find "the word X"), are rendered (non-zero box, not hidden,
not transparent) and intersect the viewport. Boxes are clipped to the viewport, so `Element.center`
is always a point a click can reach. Order is document order; `index` numbers them from 0.
"""

from __future__ import annotations

from typing import Any

from workers.envs.base import Element

ELEMENTS_JS = r"""
(limit) => {
  const INTERACTIVE = 'input, button, a, select, textarea, label, summary, [onclick], [role=button], ' +
    '[role=tab], [role=link], [role=checkbox], [role=radio], [role=menuitem], [role=option], ' +
    '[role=switch], [role=slider], [contenteditable=true], [tabindex]';
  const vw = window.innerWidth, vh = window.innerHeight;
  const out = [];
  const ownText = (el) => {
    let t = '';
    for (const n of el.childNodes) if (n.nodeType === Node.TEXT_NODE) t += n.data;
    return t.replace(/\s+/g, ' ').trim();
  };
  // The text of a control's <label>s (wrapping or `for=`): what a person reads as its name.
  const labelsOf = (el) => Array.from(el.labels || [], (l) => l.innerText || l.textContent || '')
    .join(' ').replace(/\s+/g, ' ').trim();
  const label = (el) => {
    const tag = el.tagName.toLowerCase();
    if (tag === 'input') {
      if (el.type === 'checkbox' || el.type === 'radio') {
        // "on" is HTML's default value, not a name: the label says what the box is.
        const value = el.value && el.value !== 'on' ? el.value : '';
        return (el.checked ? '[x] ' : '[ ] ') + (labelsOf(el) || value);
      }
      return el.value || el.placeholder || el.getAttribute('aria-label') || labelsOf(el);
    }
    if (tag === 'textarea') return el.value || el.placeholder || labelsOf(el);
    if (tag === 'select') return el.selectedIndex >= 0 ? el.options[el.selectedIndex].text : '';
    return (el.innerText || el.textContent || el.getAttribute('aria-label') || '').replace(/\s+/g, ' ').trim();
  };
  for (const el of document.body ? document.body.querySelectorAll('*') : []) {
    if (out.length >= limit) break;
    const tag = el.tagName.toLowerCase();
    if (tag === 'script' || tag === 'style' || tag === 'head') continue;
    const style = getComputedStyle(el);
    const interactive = el.matches(INTERACTIVE) || style.cursor === 'pointer';
    const text = interactive ? label(el) : ownText(el);
    if (!interactive && !text) continue;
    if (style.visibility === 'hidden' || style.display === 'none' || parseFloat(style.opacity) === 0) continue;
    const r = el.getBoundingClientRect();
    const x0 = Math.max(0, r.left), y0 = Math.max(0, r.top);
    const x1 = Math.min(vw, r.right), y1 = Math.min(vh, r.bottom);
    if (x1 - x0 < 1 || y1 - y0 < 1) continue;
    let kind = tag;
    if (tag === 'input') kind = 'input:' + (el.type || 'text');
    out.push({tag: kind, text: text.slice(0, 120), x: x0, y: y0, width: x1 - x0, height: y1 - y0});
  }
  return out;
}
"""


def elements_from_js(raw: list[dict[str, Any]]) -> tuple[Element, ...]:
    """Turn the script's plain objects into `Element`s numbered in document order."""
    return tuple(
        Element(
            index=i,
            tag=str(item["tag"]),
            text=str(item["text"]),
            x=round(float(item["x"]), 1),
            y=round(float(item["y"]), 1),
            width=round(float(item["width"]), 1),
            height=round(float(item["height"]), 1),
        )
        for i, item in enumerate(raw)
    )


def dom_text(elements: tuple[Element, ...]) -> str:
    """A compact text rendering for `Observation.dom_text`: one element per line with its centre."""
    lines = []
    for el in elements:
        cx, cy = el.center
        lines.append(f"[{el.index}] <{el.tag}> {el.text!r} @({cx:.0f},{cy:.0f})")
    return "\n".join(lines)
