"""Typed answers: a schema the policy's answer data must follow.

    class Price(BaseModel):
        amount: float
        currency: str

    result = await agent.run("What does the cheapest plan cost?", url=..., answer_schema=Price)
    result.data            # Price(amount=9.0, currency='EUR')

The schema goes into the policy's structured output (the `answer` action
gains a required `data` field), and the answer is validated again on
receipt: a mismatch is fed back to the model like any malformed output, and
after the retries the step fails. A JSON Schema (dict or file, the CLI's
`--answer-schema`) works the same, with `result.data` a plain dict.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from surfer.core.errors import ConfigError, ModelOutputError
from surfer.models.schema import portable_schema


class AnswerSchema:
    """The shape of a run's answer data, from `answer_schema=` (a pydantic model class or a JSON Schema
    dict): added to the policy's answer action, checked on receipt, and returned in `RunResult.data`
    (an instance of the model class, or the checked dict)."""

    def __init__(self, schema: type[BaseModel] | dict[str, Any]) -> None:
        self.model: type[BaseModel] | None = None
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            self.model = schema
            self.json_schema = portable_schema(schema.model_json_schema())
        elif isinstance(schema, dict):
            from jsonschema import Draft202012Validator
            from jsonschema.exceptions import SchemaError

            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as exc:
                raise ConfigError(f"the answer schema is not a valid JSON Schema: {exc.message}") from None
            self._validator = Draft202012Validator(schema)
            self.json_schema = portable_schema(schema)
        else:
            raise ConfigError(f"answer_schema must be a pydantic model class or a JSON Schema dict, got {schema!r}")

    @classmethod
    def of(cls, schema: "AnswerSchema | type[BaseModel] | dict[str, Any] | None") -> "AnswerSchema | None":
        return schema if schema is None or isinstance(schema, AnswerSchema) else cls(schema)

    @classmethod
    def load(cls, path: str | Path) -> "AnswerSchema":
        """A JSON Schema file (the CLI's --answer-schema)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8-sig"))  # (a byte order mark, as Windows editors write it)
        except FileNotFoundError:
            raise ConfigError(f"answer schema file {path} does not exist") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"answer schema file {path} is not readable JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"answer schema file {path} must hold a JSON object")
        return cls(data)

    def validate(self, data: Any) -> Any:
        """The validated answer data (a model instance, or the dict), or ModelOutputError
        with feedback for the model."""
        if data is None:
            raise ModelOutputError("The answer must carry `data` that follows the answer schema.")
        if self.model is not None:
            try:
                return self.model.model_validate(data)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'data'}: {e['msg']}" for e in exc.errors()[:5]
                )
                raise ModelOutputError(f"The answer's data does not follow the answer schema: {problems}.") from None
        errors = sorted(self._validator.iter_errors(data), key=lambda e: list(e.path))[:5]
        if errors:
            problems = "; ".join(f"{'.'.join(str(p) for p in e.path) or 'data'}: {e.message}" for e in errors)
            raise ModelOutputError(f"The answer's data does not follow the answer schema: {problems}.")
        return data

    def policy_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The policy's JSON schema with `data` (this schema) required on the answer action."""
        schema = copy.deepcopy(schema)
        found = False

        def walk(node: Any) -> None:
            nonlocal found
            if isinstance(node, dict):
                kind = (node.get("properties") or {}).get("type") or {}
                if kind.get("const") == "answer" or kind.get("enum") == ["answer"]:
                    node["properties"]["data"] = copy.deepcopy(self.json_schema)
                    node["required"] = [*node.get("required", []), "data"]
                    found = True
                    return
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk(schema)
        if not found:
            raise AssertionError("the policy schema has no answer action")
        return schema

    def describe(self) -> str:
        """A line for the policy prompt."""
        return "Your answer must carry `data` following this JSON schema: " + json.dumps(self.json_schema, separators=(",", ":"))
