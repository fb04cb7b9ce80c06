"""Stand-ins for services the tests cannot reach here (no cluster, no internet).

Each module says plainly what it stands in for, what it implements and what it does not
check; passing against a stand-in is not the same as passing against the real service.
"""
