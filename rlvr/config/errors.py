"""The configuration error every params loader raises (:class:`ConfigError`, re-exported as
:class:`rlvr.config.ConfigError`). A leaf module, so :mod:`rlvr.config.profiles` can raise it without importing the
package that imports it."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A ``params.yaml`` section is missing or invalid; the message names the file, section and field."""
