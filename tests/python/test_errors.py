"""The exception hierarchy and what each error carries (no cluster needed)."""

from __future__ import annotations

import json
import pickle

import pytest

import tfk8s
from tfk8s import _core


def status(code: int, reason: str, message: str, **details: object) -> str:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": message}
    if details:
        body["details"] = details
    return json.dumps(body)


def test_hierarchy() -> None:
    base = tfk8s.Error
    assert issubclass(base, Exception)
    for cls in [tfk8s.ValidationError, tfk8s.ConfigError, tfk8s.TransportError,
                tfk8s.CancelledError, tfk8s.ApiError]:
        assert issubclass(cls, base)
    assert issubclass(tfk8s.TlsError, tfk8s.TransportError)
    assert issubclass(tfk8s.ValidationError, ValueError)
    for cls in [tfk8s.BadRequest, tfk8s.Unauthorized, tfk8s.Forbidden, tfk8s.NotFound,
                tfk8s.MethodNotAllowed, tfk8s.AlreadyExists, tfk8s.Conflict, tfk8s.Gone,
                tfk8s.Invalid, tfk8s.TooManyRequests, tfk8s.Timeout, tfk8s.ServerError]:
        assert issubclass(cls, tfk8s.ApiError)
    assert issubclass(tfk8s.QuotaExceeded, tfk8s.Forbidden)
    assert tfk8s.NotFound.__module__ == "tfk8s"
    assert tfk8s.NotFound.kind == "NotFound"


@pytest.mark.parametrize(
    "code,reason,cls",
    [
        (400, "BadRequest", tfk8s.BadRequest),
        (401, "Unauthorized", tfk8s.Unauthorized),
        (403, "Forbidden", tfk8s.Forbidden),
        (404, "NotFound", tfk8s.NotFound),
        (405, "MethodNotAllowed", tfk8s.MethodNotAllowed),
        (409, "AlreadyExists", tfk8s.AlreadyExists),
        (409, "Conflict", tfk8s.Conflict),
        (410, "Gone", tfk8s.Gone),
        (422, "Invalid", tfk8s.Invalid),
        (429, "TooManyRequests", tfk8s.TooManyRequests),
        (504, "Timeout", tfk8s.Timeout),
        (500, "InternalError", tfk8s.ServerError),
    ],
)
def test_every_status_maps_to_its_class(code: int, reason: str, cls: type) -> None:
    error = _core.api_error(code, status(code, reason, "it went wrong"), "get pods x")
    assert type(error) is cls
    assert error.http_code == code
    assert error.reason == reason
    assert error.message == "it went wrong"
    assert "get pods x" in str(error)


def test_invalid_carries_causes() -> None:
    body = status(422, "Invalid", 'Pod "x" is invalid',
                  causes=[{"reason": "FieldValueRequired", "message": "Required value",
                           "field": "spec.containers"}])
    error = _core.api_error(422, body, "create pods x")
    assert isinstance(error, tfk8s.Invalid)
    assert error.causes == [tfk8s.StatusCause("spec.containers", "FieldValueRequired",
                                              "Required value")]
    cause = error.causes[0]
    assert (cause.field, cause.reason, cause.message) == (
        "spec.containers", "FieldValueRequired", "Required value")
    assert "spec.containers" in repr(cause)


def test_quota_exceeded_lists_resources() -> None:
    message = ('pods "p" is forbidden: exceeded quota: q, requested: requests.cpu=2, '
               'used: requests.cpu=0, limited: requests.cpu=1')
    error = _core.api_error(403, status(403, "Forbidden", message), "create pods p")
    assert isinstance(error, tfk8s.QuotaExceeded) and isinstance(error, tfk8s.Forbidden)
    assert error.resources == ["requests.cpu"]
    assert _core.parse_quota_exceeded_resources(message) == ["requests.cpu"]


def test_retry_after_and_non_json_bodies() -> None:
    error = _core.api_error(429, "slow down", "list pods", retry_after_seconds=3)
    assert isinstance(error, tfk8s.TooManyRequests)
    assert error.retry_after_seconds == 3
    assert "slow down" in error.message
    unknown = _core.api_error(418, "teapot", "get x")
    assert type(unknown) is tfk8s.ApiError and unknown.http_code == 418


def test_errors_pickle_with_their_attributes() -> None:
    error = _core.api_error(404, status(404, "NotFound", 'pods "x" not found'), "get pods x")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is tfk8s.NotFound
    assert (copy.http_code, copy.reason, copy.message) == (404, "NotFound", 'pods "x" not found')
    assert str(copy) == str(error)


def test_errors_can_be_raised_from_python() -> None:
    with pytest.raises(tfk8s.Error) as info:
        raise tfk8s.NotFound("made up")
    assert info.value.http_code == 0 and info.value.causes == ()


def test_validation_helpers() -> None:
    from tfk8s import validation

    assert validation.is_dns1123_label("web-0") == []
    assert validation.is_dns1123_label("Web_0")
    assert validation.is_dns1123_subdomain("a.b-c") == []
    assert validation.is_qualified_name("app.kubernetes.io/name") == []
    assert validation.is_valid_label_value("x" * 64)
    validation.require_dns1123_label("metadata.name", "ok")
    with pytest.raises(tfk8s.ValidationError) as info:
        validation.require_dns1123_label("metadata.name", "Not OK")
    assert info.value.field == "metadata.name" and info.value.value == "Not OK"
    assert info.value.causes[0].field == "metadata.name"
    with pytest.raises(tfk8s.ValidationError):
        validation.require_statefulset_name("metadata.name", "x" * 53)
    with pytest.raises(tfk8s.ValidationError):
        validation.require_label_key("key", "bad key")
    with pytest.raises(tfk8s.ValidationError):
        validation.require_label_value("value", "-bad")
    with pytest.raises(tfk8s.ValidationError):
        validation.require_dns1123_subdomain("name", "UPPER")
    assert validation.STATEFULSET_NAME_MAX_LENGTH == 52
    assert validation.DNS1123_LABEL_MAX_LENGTH == 63
