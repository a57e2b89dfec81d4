"""Build hook: compiles the cffi extension ``uet.native._uet_native``, the C event core and
fabric path ``uet.native._event_core``, the codec's common frames
``uet.native._codec_core`` and the end point's per-packet cores ``uet.native._recovery_core``,
``_sender_core``, ``_target_core``, ``_fep_core``, ``_ses_core`` and ``_cms_core``, and the
huge-page region for medium raw blocks ``uet.native._huge_heap`` (see docs/native.md).

All metadata lives in pyproject.toml; this file only adds the extensions.
"""

from setuptools import Extension, setup

setup(
    cffi_modules=["uet/native/build_native.py:ffibuilder"],
    # the fabric's event core (uet.fabric.scheduler) and the per-frame path of its ports,
    # switch ports and channels (uet/native/fabric_core.c): CPython extension types, since
    # they hold the callbacks and frames they run (cffi cannot keep Python objects)
    # (and the run sampler's change-only series, uet/native/series_core.c)
    ext_modules=[Extension("uet.native._event_core",
                           ["uet/native/event_core.c", "uet/native/fabric_core.c",
                            "uet/native/series_core.c"],
                           depends=["uet/native/event_core.h", "uet/native/pyint.h",
                                    "uet/native/method_cache.h"],
                           optional=True),
                 # the codec's two common frames (uet.wire.codec's fast path), in C
                 Extension("uet.native._codec_core", ["uet/native/codec_core.c"],
                           depends=["uet/native/slots.h", "uet/native/method_cache.h",
                                    "uet/native/pyint.h",
                                    "uet/native/records.h"],
                           optional=True),
                 # an initiator PDC's per-ACK and per-send loss recovery (uet.pds.recovery)
                 Extension("uet.native._recovery_core", ["uet/native/recovery_core.c"],
                           depends=["uet/native/slots.h", "uet/native/method_cache.h",
                                    "uet/native/pyint.h"],
                           optional=True),
                 # an initiator PDC's new data packets and its ACKs (uet.pds.initiator:
                 # poll_data, _send, rx_ack)
                 Extension("uet.native._sender_core", ["uet/native/sender_core.c"],
                           depends=["uet/native/slots.h", "uet/native/method_cache.h",
                                    "uet/native/pyint.h",
                                    "uet/native/records.h"],
                           optional=True),
                 # a target PDC's requests, ACKs and answers (uet.pds.target, uet.pds.ack,
                 # uet.pds.endpoint: rx_request, build_ack, poll_transmit, respond, ...)
                 Extension("uet.native._target_core", ["uet/native/target_core.c"],
                           depends=["uet/native/slots.h", "uet/native/method_cache.h",
                                    "uet/native/pyint.h",
                                    "uet/native/records.h"],
                           optional=True),
                 # a fabric end point's frame interface, pump and delivery (uet.endpoint.fep:
                 # receive, pop_*, pump, deliver, DeliveryAudit.see)
                 Extension("uet.native._fep_core", ["uet/native/fep_core.c"],
                           depends=["uet/native/slots.h", "uet/native/method_cache.h",
                                    "uet/native/pyint.h"],
                           optional=True),
                 # the SES target's WRITE packets (uet.ses.target: Target.handle)
                 Extension("uet.native._ses_core", ["uet/native/ses_core.c"],
                           depends=["uet/native/slots.h", "uet/native/method_cache.h",
                                    "uet/native/pyint.h"],
                           optional=True),
                 # the sender's congestion control per ACK (uet.cms.sender, uet.cms.nscc)
                 Extension("uet.native._cms_core", ["uet/native/cms_core.c"],
                           depends=["uet/native/slots.h", "uet/native/method_cache.h",
                                    "uet/native/pyint.h",
                                    "uet/native/records.h"],
                           optional=True),
                 # medium raw blocks (the frames) in a huge-page region (uet.native.huge_heap)
                 Extension("uet.native._huge_heap", ["uet/native/huge_heap.c"],
                           optional=True)],
)
