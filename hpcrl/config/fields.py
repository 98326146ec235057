"""The one way a config field is declared (:func:`hpcrl.fields.doc`, below every layer so
that the algorithms' own sections in core declare their keys the same way): a default and
the documentation that ``hpcrl config show --docs``, the docs site and the error messages
quote."""
from __future__ import annotations

from hpcrl.fields import doc

__all__ = ["doc"]
