"""What a person reads: Matplotlib figures (:mod:`.plots`) and the self-contained HTML reports
(:mod:`.html`). Nothing here computes a figure the other subpackages do not already give.
"""
