"""The only owners of threads: Qt controllers that run the engine off the GUI thread and relay
its events as signals (assistant, indexing, prepare, inbox, sources, bundles)."""
