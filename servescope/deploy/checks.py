"""Checks of `deploy render` values; each error names the value, the settings bridge adds the flag."""

from __future__ import annotations

import re
from functools import partial
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator

from servescope.core.durations import is_duration

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_IMAGE = re.compile(r"^[a-z0-9][^\s]*$")
_PATH = re.compile(r"^[A-Za-z0-9._/-]+$")


def dns_label(value: str) -> str:
    if not _DNS_LABEL.match(value) or len(value) > 63:
        raise ValueError(f"{value!r} is not a DNS label (a-z, 0-9 and '-', at most 63 characters)")
    return value


def optional_dns_label(value: str) -> str:
    return dns_label(value) if value else value


def optional_object_name(value: str) -> str:
    if value and (not _DNS_SUBDOMAIN.match(value) or len(value) > 253):
        raise ValueError(f"{value!r} is not a Kubernetes object name (a-z, 0-9, '-' and '.')")
    return value


def image(value: str) -> str:
    if not _IMAGE.match(value):
        raise ValueError(f"{value!r} is not an image reference such as registry/name:tag")
    return value


def duration(value: str) -> str:
    if not is_duration(value):
        raise ValueError(f"{value!r} is not a Prometheus duration such as 15s or 1m")
    return value


def optional_url(value: str) -> str:
    parts = urlsplit(value)
    if value and (parts.scheme not in ("http", "https") or not parts.netloc):
        raise ValueError(f"{value!r} is not an http:// or https:// URL")
    return value


def pairs(value: object) -> object:
    """From the command line: a list of KEY=VALUE strings becomes a mapping."""
    if not isinstance(value, list | tuple):
        return value
    found: dict[str, str] = {}
    for item in value:
        key, sep, label_value = str(item).partition("=")
        if not sep:
            raise ValueError(f"{item!r} is not KEY=VALUE")
        found[key.strip()] = label_value.strip()
    return found


def labels(value: dict[str, str], *, may_be_empty: bool = False) -> dict[str, str]:
    """Label keys and values as Kubernetes accepts them in selectors."""
    if not value and not may_be_empty:
        raise ValueError("give at least one KEY=VALUE")
    for key, label_value in value.items():
        label_key(key)
        if label_value and (not _LABEL_NAME.match(label_value) or len(label_value) > 63):
            raise ValueError(f"{key}={label_value!r}: not a label value (at most 63 of A-Z a-z 0-9 - _ .)")
    return value


def label_key(key: str) -> str:
    prefix, _, name = key.rpartition("/")
    if (prefix and not _DNS_SUBDOMAIN.match(prefix)) or not _LABEL_NAME.match(name) or len(name) > 63:
        raise ValueError(f"{key!r} is not a label key such as example.com/name")
    return key


def absolute_path(value: str) -> str:
    """A host folder such as /var/lib/kubelet: absolute, plain characters, no `..`, no trailing slash."""
    parts = value.split("/")
    if not value.startswith("/") or value.endswith("/") or ".." in parts or not _PATH.match(value):
        raise ValueError(f"{value!r} is not an absolute folder such as /var/lib/kubelet")
    return value


def regex(value: str) -> str:
    """A relabeling regular expression (RE2 in Prometheus; Python's parser rejects what RE2 would)."""
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{value!r} is not a regular expression: {exc}") from None
    return value


def port_name(value: str) -> str:
    if len(value) > 15:
        raise ValueError(f"{value!r} is not a port name (at most 15 characters)")
    return dns_label(value)


# The options' value types: a field declared with one is checked by it, and its error names the value.
DnsLabel = Annotated[str, AfterValidator(dns_label)]
OptionalDnsLabel = Annotated[str, AfterValidator(optional_dns_label)]
OptionalObjectName = Annotated[str, AfterValidator(optional_object_name)]
OptionalUrl = Annotated[str, AfterValidator(optional_url)]
Image = Annotated[str, AfterValidator(image)]
Duration = Annotated[str, AfterValidator(duration)]
Regex = Annotated[str, AfterValidator(regex)]
PortName = Annotated[str, AfterValidator(port_name)]
# KEY=VALUE items from the command line (or a mapping) become selector labels, at least one ...
Labels = Annotated[dict[str, str], BeforeValidator(pairs), AfterValidator(labels)]
# ... or any number, none included.
AnyLabels = Annotated[
    dict[str, str], BeforeValidator(pairs), AfterValidator(partial(labels, may_be_empty=True))
]
