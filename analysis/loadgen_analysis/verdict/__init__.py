"""Where the limit is: errors, client, network or server (:mod:`.attribution`), each judged by
its own check module from the reductions, the fitted models and the client's own samples
(:mod:`.client_evidence`).
"""
