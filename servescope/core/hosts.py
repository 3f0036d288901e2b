"""What a configured host to connect to may look like, where it ends up in a child's argv."""

from __future__ import annotations

# A host name, an address or an [IPv6] address, with an optional port; empty for none. Never anything a
# command line reads as an option (a leading `-`) or splits (spaces, shell characters).
HOST_PORT_PATTERN = r"^([A-Za-z0-9\[][A-Za-z0-9_.\[\]:-]*)?$"
