from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RenderLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RENDER_LEVEL_UNSPECIFIED: _ClassVar[RenderLevel]
    RENDER_LEVEL_NAME: _ClassVar[RenderLevel]
    RENDER_LEVEL_CONTRACT: _ClassVar[RenderLevel]
    RENDER_LEVEL_OUTLINE: _ClassVar[RenderLevel]
    RENDER_LEVEL_FULL: _ClassVar[RenderLevel]
RENDER_LEVEL_UNSPECIFIED: RenderLevel
RENDER_LEVEL_NAME: RenderLevel
RENDER_LEVEL_CONTRACT: RenderLevel
RENDER_LEVEL_OUTLINE: RenderLevel
RENDER_LEVEL_FULL: RenderLevel

class RegisterSkillRequest(_message.Message):
    __slots__ = ("files", "strict", "folder")
    class FilesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    FILES_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    FOLDER_FIELD_NUMBER: _ClassVar[int]
    files: _containers.ScalarMap[str, bytes]
    strict: bool
    folder: str
    def __init__(self, files: _Optional[_Mapping[str, bytes]] = ..., strict: _Optional[bool] = ..., folder: _Optional[str] = ...) -> None: ...

class Diagnostic(_message.Message):
    __slots__ = ("file", "line", "rule", "message")
    FILE_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    file: str
    line: int
    rule: str
    message: str
    def __init__(self, file: _Optional[str] = ..., line: _Optional[int] = ..., rule: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class RegisterSkillResponse(_message.Message):
    __slots__ = ("name", "version", "section_count", "warnings", "unchanged", "digest")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SECTION_COUNT_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    section_count: int
    warnings: _containers.RepeatedCompositeFieldContainer[Diagnostic]
    unchanged: bool
    digest: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ..., section_count: _Optional[int] = ..., warnings: _Optional[_Iterable[_Union[Diagnostic, _Mapping]]] = ..., unchanged: _Optional[bool] = ..., digest: _Optional[str] = ...) -> None: ...

class SkillSummary(_message.Message):
    __slots__ = ("name", "version", "description", "section_count", "token_count", "digest", "registered_at_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SECTION_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    description: str
    section_count: int
    token_count: int
    digest: str
    registered_at_ms: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ..., description: _Optional[str] = ..., section_count: _Optional[int] = ..., token_count: _Optional[int] = ..., digest: _Optional[str] = ..., registered_at_ms: _Optional[int] = ...) -> None: ...

class ListSkillsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSkillsResponse(_message.Message):
    __slots__ = ("skills", "next_page_token")
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    skills: _containers.RepeatedCompositeFieldContainer[SkillSummary]
    next_page_token: str
    def __init__(self, skills: _Optional[_Iterable[_Union[SkillSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetSkillRequest(_message.Message):
    __slots__ = ("name", "version", "include_files")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FILES_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    include_files: bool
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ..., include_files: _Optional[bool] = ...) -> None: ...

class Signature(_message.Message):
    __slots__ = ("name", "kind")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ...) -> None: ...

class Contract(_message.Message):
    __slots__ = ("inputs", "outputs", "resources", "guards", "verifies", "state_changing")
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    GUARDS_FIELD_NUMBER: _ClassVar[int]
    VERIFIES_FIELD_NUMBER: _ClassVar[int]
    STATE_CHANGING_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedCompositeFieldContainer[Signature]
    outputs: _containers.RepeatedCompositeFieldContainer[Signature]
    resources: _containers.RepeatedScalarFieldContainer[str]
    guards: _containers.RepeatedScalarFieldContainer[str]
    verifies: _containers.RepeatedScalarFieldContainer[str]
    state_changing: bool
    def __init__(self, inputs: _Optional[_Iterable[_Union[Signature, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[Signature, _Mapping]]] = ..., resources: _Optional[_Iterable[str]] = ..., guards: _Optional[_Iterable[str]] = ..., verifies: _Optional[_Iterable[str]] = ..., state_changing: _Optional[bool] = ...) -> None: ...

class Section(_message.Message):
    __slots__ = ("index", "title", "heading_path", "role", "is_step", "file", "first_line", "last_line", "token_count", "contract", "text")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    HEADING_PATH_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    IS_STEP_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    FIRST_LINE_FIELD_NUMBER: _ClassVar[int]
    LAST_LINE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    CONTRACT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    index: int
    title: str
    heading_path: _containers.RepeatedScalarFieldContainer[str]
    role: str
    is_step: bool
    file: str
    first_line: int
    last_line: int
    token_count: int
    contract: Contract
    text: str
    def __init__(self, index: _Optional[int] = ..., title: _Optional[str] = ..., heading_path: _Optional[_Iterable[str]] = ..., role: _Optional[str] = ..., is_step: _Optional[bool] = ..., file: _Optional[str] = ..., first_line: _Optional[int] = ..., last_line: _Optional[int] = ..., token_count: _Optional[int] = ..., contract: _Optional[_Union[Contract, _Mapping]] = ..., text: _Optional[str] = ...) -> None: ...

class Edge(_message.Message):
    __slots__ = ("source", "target", "kind", "label")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    source: int
    target: int
    kind: str
    label: str
    def __init__(self, source: _Optional[int] = ..., target: _Optional[int] = ..., kind: _Optional[str] = ..., label: _Optional[str] = ...) -> None: ...

class Resource(_message.Message):
    __slots__ = ("path", "kind", "linked_from", "present")
    PATH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LINKED_FROM_FIELD_NUMBER: _ClassVar[int]
    PRESENT_FIELD_NUMBER: _ClassVar[int]
    path: str
    kind: str
    linked_from: _containers.RepeatedScalarFieldContainer[int]
    present: bool
    def __init__(self, path: _Optional[str] = ..., kind: _Optional[str] = ..., linked_from: _Optional[_Iterable[int]] = ..., present: _Optional[bool] = ...) -> None: ...

class GetSkillResponse(_message.Message):
    __slots__ = ("skill", "sections", "edges", "resources", "warnings", "license", "compatibility", "metadata", "allowed_tools", "files", "folder")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class FilesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    SKILL_FIELD_NUMBER: _ClassVar[int]
    SECTIONS_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    LICENSE_FIELD_NUMBER: _ClassVar[int]
    COMPATIBILITY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    FOLDER_FIELD_NUMBER: _ClassVar[int]
    skill: SkillSummary
    sections: _containers.RepeatedCompositeFieldContainer[Section]
    edges: _containers.RepeatedCompositeFieldContainer[Edge]
    resources: _containers.RepeatedCompositeFieldContainer[Resource]
    warnings: _containers.RepeatedCompositeFieldContainer[Diagnostic]
    license: str
    compatibility: str
    metadata: _containers.ScalarMap[str, str]
    allowed_tools: _containers.RepeatedScalarFieldContainer[str]
    files: _containers.ScalarMap[str, bytes]
    folder: str
    def __init__(self, skill: _Optional[_Union[SkillSummary, _Mapping]] = ..., sections: _Optional[_Iterable[_Union[Section, _Mapping]]] = ..., edges: _Optional[_Iterable[_Union[Edge, _Mapping]]] = ..., resources: _Optional[_Iterable[_Union[Resource, _Mapping]]] = ..., warnings: _Optional[_Iterable[_Union[Diagnostic, _Mapping]]] = ..., license: _Optional[str] = ..., compatibility: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., allowed_tools: _Optional[_Iterable[str]] = ..., files: _Optional[_Mapping[str, bytes]] = ..., folder: _Optional[str] = ...) -> None: ...

class RemoveSkillRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RemoveSkillResponse(_message.Message):
    __slots__ = ("removed_version",)
    REMOVED_VERSION_FIELD_NUMBER: _ClassVar[int]
    removed_version: int
    def __init__(self, removed_version: _Optional[int] = ...) -> None: ...

class HydrateRequest(_message.Message):
    __slots__ = ("query", "budget_tokens", "skill_names", "requester")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SKILL_NAMES_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_FIELD_NUMBER: _ClassVar[int]
    query: str
    budget_tokens: int
    skill_names: _containers.RepeatedScalarFieldContainer[str]
    requester: str
    def __init__(self, query: _Optional[str] = ..., budget_tokens: _Optional[int] = ..., skill_names: _Optional[_Iterable[str]] = ..., requester: _Optional[str] = ...) -> None: ...

class HydratedSection(_message.Message):
    __slots__ = ("skill", "index", "title", "role")
    SKILL_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    skill: str
    index: int
    title: str
    role: str
    def __init__(self, skill: _Optional[str] = ..., index: _Optional[int] = ..., title: _Optional[str] = ..., role: _Optional[str] = ...) -> None: ...

class Coverage(_message.Message):
    __slots__ = ("anchors", "anchors_covered", "anchors_uncoverable", "dependencies_closed", "verifier_reachable")
    ANCHORS_FIELD_NUMBER: _ClassVar[int]
    ANCHORS_COVERED_FIELD_NUMBER: _ClassVar[int]
    ANCHORS_UNCOVERABLE_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCIES_CLOSED_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_REACHABLE_FIELD_NUMBER: _ClassVar[int]
    anchors: _containers.RepeatedScalarFieldContainer[str]
    anchors_covered: _containers.RepeatedScalarFieldContainer[str]
    anchors_uncoverable: _containers.RepeatedScalarFieldContainer[str]
    dependencies_closed: bool
    verifier_reachable: bool
    def __init__(self, anchors: _Optional[_Iterable[str]] = ..., anchors_covered: _Optional[_Iterable[str]] = ..., anchors_uncoverable: _Optional[_Iterable[str]] = ..., dependencies_closed: _Optional[bool] = ..., verifier_reachable: _Optional[bool] = ...) -> None: ...

class HydrateResponse(_message.Message):
    __slots__ = ("context", "token_count", "hydration_id", "sections", "coverage", "source_skills", "whole_skill_fallback", "macros")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    HYDRATION_ID_FIELD_NUMBER: _ClassVar[int]
    SECTIONS_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SKILLS_FIELD_NUMBER: _ClassVar[int]
    WHOLE_SKILL_FALLBACK_FIELD_NUMBER: _ClassVar[int]
    MACROS_FIELD_NUMBER: _ClassVar[int]
    context: str
    token_count: int
    hydration_id: str
    sections: _containers.RepeatedCompositeFieldContainer[HydratedSection]
    coverage: Coverage
    source_skills: _containers.RepeatedScalarFieldContainer[str]
    whole_skill_fallback: bool
    macros: _containers.RepeatedCompositeFieldContainer[HydratedMacro]
    def __init__(self, context: _Optional[str] = ..., token_count: _Optional[int] = ..., hydration_id: _Optional[str] = ..., sections: _Optional[_Iterable[_Union[HydratedSection, _Mapping]]] = ..., coverage: _Optional[_Union[Coverage, _Mapping]] = ..., source_skills: _Optional[_Iterable[str]] = ..., whole_skill_fallback: _Optional[bool] = ..., macros: _Optional[_Iterable[_Union[HydratedMacro, _Mapping]]] = ...) -> None: ...

class HydratedMacro(_message.Message):
    __slots__ = ("macro_id", "name", "skill", "first_index", "section_count", "level")
    MACRO_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SKILL_FIELD_NUMBER: _ClassVar[int]
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    SECTION_COUNT_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    macro_id: str
    name: str
    skill: str
    first_index: int
    section_count: int
    level: RenderLevel
    def __init__(self, macro_id: _Optional[str] = ..., name: _Optional[str] = ..., skill: _Optional[str] = ..., first_index: _Optional[int] = ..., section_count: _Optional[int] = ..., level: _Optional[_Union[RenderLevel, str]] = ...) -> None: ...

class ExpandRequest(_message.Message):
    __slots__ = ("hydration_id", "macro_id", "level")
    HYDRATION_ID_FIELD_NUMBER: _ClassVar[int]
    MACRO_ID_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    hydration_id: str
    macro_id: str
    level: RenderLevel
    def __init__(self, hydration_id: _Optional[str] = ..., macro_id: _Optional[str] = ..., level: _Optional[_Union[RenderLevel, str]] = ...) -> None: ...

class ExpandResponse(_message.Message):
    __slots__ = ("text", "token_count")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    text: str
    token_count: int
    def __init__(self, text: _Optional[str] = ..., token_count: _Optional[int] = ...) -> None: ...

class ReportOutcomeRequest(_message.Message):
    __slots__ = ("hydration_id", "success", "failed_macro_ids")
    HYDRATION_ID_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    FAILED_MACRO_IDS_FIELD_NUMBER: _ClassVar[int]
    hydration_id: str
    success: bool
    failed_macro_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, hydration_id: _Optional[str] = ..., success: _Optional[bool] = ..., failed_macro_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class MacroRevision(_message.Message):
    __slots__ = ("macro_id", "level", "retired")
    MACRO_ID_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    RETIRED_FIELD_NUMBER: _ClassVar[int]
    macro_id: str
    level: RenderLevel
    retired: bool
    def __init__(self, macro_id: _Optional[str] = ..., level: _Optional[_Union[RenderLevel, str]] = ..., retired: _Optional[bool] = ...) -> None: ...

class ReportOutcomeResponse(_message.Message):
    __slots__ = ("revisions",)
    REVISIONS_FIELD_NUMBER: _ClassVar[int]
    revisions: _containers.RepeatedCompositeFieldContainer[MacroRevision]
    def __init__(self, revisions: _Optional[_Iterable[_Union[MacroRevision, _Mapping]]] = ...) -> None: ...

class GetLibraryStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetLibraryStatsResponse(_message.Message):
    __slots__ = ("skills", "sections", "macros", "compression_ratio", "dependency_preservation", "verifier_reachability", "raw_tokens", "active_tokens")
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    SECTIONS_FIELD_NUMBER: _ClassVar[int]
    MACROS_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_RATIO_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_PRESERVATION_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_REACHABILITY_FIELD_NUMBER: _ClassVar[int]
    RAW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    skills: int
    sections: int
    macros: int
    compression_ratio: float
    dependency_preservation: float
    verifier_reachability: float
    raw_tokens: int
    active_tokens: int
    def __init__(self, skills: _Optional[int] = ..., sections: _Optional[int] = ..., macros: _Optional[int] = ..., compression_ratio: _Optional[float] = ..., dependency_preservation: _Optional[float] = ..., verifier_reachability: _Optional[float] = ..., raw_tokens: _Optional[int] = ..., active_tokens: _Optional[int] = ...) -> None: ...
