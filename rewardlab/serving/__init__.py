"""Serving rewards over HTTP: ``rewardlab serve`` (`start_server`, `create_app`; the limits in
`ServeOptions`) and its client `RemoteReward`. A client never imports the server's dependencies
(FastAPI, uvicorn, prometheus-client): names are imported on first use.
"""

from rewardlab.lazy_exports import lazy_exports

_EXPORTS = {
    "RemoteReward": "rewardlab.serving.remote",
    "ServeOptions": "rewardlab.serving.limits",
    "create_app": "rewardlab.serving.app",
    "start_server": "rewardlab.serving.serve",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
