"""The base of every config model: an unknown or misspelled key is an error.

rc1.config.load reports it with its dotted path together with every other error in the file.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
