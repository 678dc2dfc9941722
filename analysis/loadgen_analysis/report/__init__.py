"""What a person reads: Matplotlib figures (:mod:`.plots`) and the self-contained HTML reports
(:mod:`.html`, built from the sections in :mod:`.sections` and the blocks in :mod:`.markup`).
Nothing here computes a figure the other subpackages do not already give.
"""
