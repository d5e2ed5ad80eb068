"""Serving rewards over HTTP: ``rewardlab serve`` (`serve.serve`, `app.create_app`) and its client
`remote.RemoteReward`.

Modules are imported one by one (``from rewardlab.serving.remote import RemoteReward``), so that
a client never imports the server's dependencies (FastAPI, uvicorn, prometheus-client).
"""
