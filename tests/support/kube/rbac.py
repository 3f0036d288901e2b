"""RBAC as the API server evaluates it, from the very Role/ClusterRole/(Cluster)RoleBinding objects that
`servescope deploy render` emits (parsed from the rendered YAML): a verb no bound rule grants is a 403.

The rules: a request is allowed when a ClusterRoleBinding binds the ServiceAccount to a ClusterRole with
a matching rule (any namespace, and cluster-scoped resources), or a RoleBinding in the request's
namespace binds it to a Role there (or a ClusterRole) with one. A rule matches when its apiGroups,
resources (`pods/eviction` for a subresource) and verbs hold the request's (or `*`), and its
resourceNames, when given, hold the object's name (never a collection).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml


@dataclass(frozen=True)
class Request:
    """What is asked: verb, API group ("" for core), resource (with /subresource), namespace, name."""

    verb: str
    group: str
    resource: str
    namespace: str | None
    name: str | None

    def denial(self, user: str) -> str:
        where = f' in the namespace "{self.namespace}"' if self.namespace else " at the cluster scope"
        target = f'{self.resource.split("/")[0]} "{self.name}"' if self.name else self.resource
        return (
            f'{target} is forbidden: User "{user}" cannot {self.verb} resource "{self.resource}" '
            f'in API group "{self.group}"{where}'
        )


def _matches(values: list[str], wanted: str) -> bool:
    return "*" in values or wanted in values


def _rule_allows(rule: dict[str, Any], request: Request) -> bool:
    if not _matches(rule.get("apiGroups") or [], request.group):
        return False
    if not _matches(rule.get("resources") or [], request.resource):
        return False
    if not _matches(rule.get("verbs") or [], request.verb):
        return False
    names = rule.get("resourceNames")
    return not names or (request.name is not None and request.name in names)


@dataclass
class Rbac:
    """The roles and bindings of a rendered manifest set."""

    roles: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    bindings: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_documents(cls, documents: Iterable[dict[str, Any]]) -> Rbac:
        rbac = cls()
        for doc in documents:
            if not isinstance(doc, dict):
                continue
            kind, meta = doc.get("kind"), doc.get("metadata") or {}
            if kind == "ClusterRole":
                rbac.roles[("ClusterRole", meta["name"])] = doc.get("rules") or []
            elif kind == "Role":
                rbac.roles[(f"Role:{meta['namespace']}", meta["name"])] = doc.get("rules") or []
            elif kind in ("RoleBinding", "ClusterRoleBinding"):
                rbac.bindings.append(doc)
        return rbac

    @classmethod
    def from_yaml(cls, text: str) -> Rbac:
        return cls.from_documents(yaml.safe_load_all(text))

    def _rules(self, binding: dict[str, Any]) -> list[dict[str, Any]]:
        ref = binding.get("roleRef") or {}
        if ref.get("kind") == "ClusterRole":
            return self.roles.get(("ClusterRole", ref.get("name")), [])
        namespace = (binding.get("metadata") or {}).get("namespace")
        return self.roles.get((f"Role:{namespace}", ref.get("name")), [])

    def allows(self, account: tuple[str, str], request: Request) -> bool:
        """Whether the ServiceAccount (namespace, name) may make the request."""
        for binding in self.bindings:
            subjects = binding.get("subjects") or []
            bound = any(
                s.get("kind") == "ServiceAccount" and (s.get("namespace"), s.get("name")) == account
                for s in subjects
            )
            if not bound:
                continue
            if binding["kind"] == "RoleBinding":
                namespace = (binding.get("metadata") or {}).get("namespace")
                if request.namespace is None or request.namespace != namespace:
                    continue
            if any(_rule_allows(rule, request) for rule in self._rules(binding)):
                return True
        return False
