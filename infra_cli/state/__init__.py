"""What infra remembers, kept on Azure itself (no state file): ownership tags on each resource
(conventions.py), smoke records (records.py) and the stack lock (lock.py), behind one interface (store.py)."""
