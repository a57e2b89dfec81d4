"""The conformance catalogue, one module per area (see ``uet.conformance.registry.AREAS``).

Every case is ``fn(peer)`` registered with :func:`uet.conformance.registry.case`; shared
steps (open a PDC, read memory back, make the device initiate a flow) are in
:mod:`uet.conformance.cases.common`.
"""
