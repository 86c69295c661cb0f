"""The operations every surface serves, declared once (``table``), the errors they fail with
as kinds (``failures``), their response models (``models``) and text (``texts``), and the
builder of what a process needs to answer them (``build_services``)."""

from poimen_memory.operations.build import build_services, store_label
from poimen_memory.operations.failures import KINDS, Failure, classify
from poimen_memory.operations.models import *  # noqa: F403
from poimen_memory.operations.table import (
    OPERATIONS,
    CliSpec,
    HttpRoute,
    Operation,
    Services,
    operation,
)

__all__ = [
    "KINDS",
    "OPERATIONS",
    "CliSpec",
    "Failure",
    "HttpRoute",
    "Operation",
    "Services",
    "build_services",
    "classify",
    "operation",
    "store_label",
]
