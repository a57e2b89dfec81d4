"""A fabric end point (FEP): SES + PDS + CMS + codec composed, still sans-IO.

:class:`~uet.endpoint.fep.FabricEndpoint` speaks Ethernet frames (or UET datagrams) with
every call taking ``now``; :mod:`uet.endpoint.config` turns a profile into the PDS and CMS
configurations it runs with. Any driver (the virtual fabric, a live socket loop, a
conformance harness) can host it. See ``docs/architecture.md``.
"""
