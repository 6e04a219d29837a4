"""Self-contained HTML reports (`report.html`, `index.html`): the pages (`html`), formulas
as MathML (`math`), inline SVG charts (`svg`), and the stylesheet and script (`assets`).
"""
