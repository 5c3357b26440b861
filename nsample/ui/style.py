"""The page's CSS: the card grid, the cards, token shading, the branch cut, ratings, the compare view."""

CSS = """
#ns-cards { display: grid !important; grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); gap: 12px; }
#ns-cards { align-items: stretch !important; }
#ns-cards > .column { min-width: 0 !important; width: auto !important; justify-content: space-between; }
#ns-cards .ns-card-slot { flex-grow: 1; display: flex; flex-direction: column; }
#ns-cards .ns-card-slot > div, #ns-cards .ns-card-slot .ns-card { flex-grow: 1; }
#ns-cards .ns-card-buttons { gap: 6px; }
#ns-order { display: none; }
.ns-card { border: 1px solid var(--border-color-primary); border-radius: 10px; padding: 10px 12px;
           background: var(--background-fill-secondary); min-height: 120px; }
.ns-card.ns-marked { border-color: var(--color-accent); box-shadow: 0 0 0 1px var(--color-accent); }
.ns-head { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; font-size: 12px;
           color: var(--body-text-color-subdued); margin-bottom: 6px; }
.ns-index { font-weight: 700; font-size: 14px; color: var(--body-text-color); margin-right: 4px; }
.ns-pill { border-radius: 999px; padding: 1px 8px; background: var(--background-fill-primary);
           border: 1px solid var(--border-color-primary); }
.ns-mark { color: var(--color-accent); border-color: var(--color-accent); font-weight: 600; }
.ns-finish-running { color: var(--color-accent); }
.ns-finish-stop { color: #15803d; border-color: #15803d; }
.ns-finish-length { color: #b45309; border-color: #b45309; }
.ns-finish-cancelled, .ns-finish-error { color: #b91c1c; border-color: #b91c1c; }
.ns-text { white-space: pre-wrap; word-break: break-word; font-size: 14px; line-height: 1.45;
           color: var(--body-text-color); max-height: 420px; overflow-y: auto; }
.ns-text .ns-tok { cursor: text; border-radius: 3px; }
.ns-text .ns-tok:hover { outline: 1px dashed var(--color-accent); }
.ns-text .ns-after-cut { opacity: 0.35; text-decoration: line-through; }
body.ns-shade .ns-tok[style] { background: rgba(239, 68, 68, calc((1 - var(--p)) * 0.75)); }
.ns-empty { color: var(--body-text-color-subdued); font-style: italic; }
#ns-repro .ns-text { border-left: 3px solid var(--color-accent); padding-left: 8px; }
.ns-compare { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.ns-compare del { background: rgba(239, 68, 68, 0.25); text-decoration: none; }
.ns-compare ins { background: rgba(34, 197, 94, 0.25); text-decoration: none; }
.ns-card.ns-best { border-color: #ca8a04; box-shadow: 0 0 0 2px #ca8a04; }
.ns-best-pill { color: #a16207; border-color: #ca8a04; font-weight: 600; }
.ns-rate-bar { display: flex; gap: 6px; margin-top: 8px; }
.ns-rate { border: 1px solid var(--border-color-primary); border-radius: 6px; padding: 1px 8px; font-size: 13px;
           background: var(--background-fill-primary); cursor: pointer; }
.ns-rate.ns-on { background: var(--color-accent-soft); border-color: var(--color-accent); font-weight: 600; }
#ns-cards .ns-note textarea { font-size: 12px; }
.ns-answer { color: var(--c); border-color: var(--c); font-weight: 600; }
.ns-check-pass { color: #15803d; border-color: #15803d; }
.ns-check-fail { color: #b91c1c; border-color: #b91c1c; }
.ns-check-error { color: #b45309; border-color: #b45309; }
.ns-alt-row { display: flex; flex-wrap: wrap; gap: 6px; margin-top: 6px; }
.ns-alt { border: 1px solid var(--border-color-primary); border-radius: 6px; padding: 2px 8px; cursor: pointer;
          background: var(--background-fill-primary); font-size: 13px; }
.ns-alt.ns-sampled { border-color: var(--color-accent); }
.ns-alt:disabled { opacity: 0.4; cursor: not-allowed; }
.ns-branch { font-size: 14px; }
.ns-prefix { white-space: pre-wrap; margin: 6px 0; padding: 6px 10px; border-left: 3px solid var(--color-accent);
             color: var(--body-text-color-subdued); }
"""
