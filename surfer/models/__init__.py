"""Model backends (one required method: `complete`) and per-family profiles."""

from .backend import Completion, ImagePart, Message, ModelBackend, ModelRequest, TextPart, Usage
from .scripted import ScriptedModel

__all__ = [
    "Completion", "ImagePart", "Message", "ModelBackend", "ModelRequest", "ScriptedModel",
    "TextPart", "Usage",
]
