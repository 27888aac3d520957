"""The one transport path (``http.py``: deadlines, content-encoding undone, the message
size limit), shared by the recorder, the probe's driver, the client and the gateway; the
recorder (``record.py``); and serving an ASGI app on loopback (``serving.py``)."""
