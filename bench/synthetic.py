"""Synthetic skill libraries of any size, for tests and benchmarks: deterministic for a seed.

Each skill is a real Agent Skills package (front matter, headings, numbered steps, a verifier, failure
handling, output) about one task: a verb, an object and a domain. Shared routines (loading and checking a
table, opening a pull request, setting up an environment, ...) are planted in many skills, each time
paraphrased by swapping words for synonyms, so they recur as near-duplicates the way real libraries repeat
procedures. Queries name a skill's task in other words and know which skill they target.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

DOMAINS = {
    "finance": ("invoice", "ledger", "refund", "payment", "budget", "expense report"),
    "support": ("ticket", "escalation", "customer reply", "survey", "complaint", "knowledge article"),
    "devops": ("deployment", "rollback", "incident", "alert rule", "release", "pipeline"),
    "data": ("dataset", "dashboard", "schema", "pivot table", "forecast", "cohort"),
    "docs": ("contract", "proposal", "slide deck", "changelog", "runbook", "newsletter"),
    "research": ("literature review", "experiment", "protein structure", "survey analysis", "citation", "grant"),
    "commerce": ("order", "shipment", "return", "catalog entry", "price list", "inventory count"),
    "people": ("onboarding plan", "job posting", "interview loop", "offer letter", "review cycle", "org chart"),
}
SYSTEMS = ("SAP", "Salesforce", "Jira", "Snowflake", "Zendesk", "GitHub", "Workday", "Shopify", "Notion", "Stripe")
REGIONS = ("EMEA", "APAC", "LATAM", "Nordics", "Iberia", "Benelux", "Canada", "Japan", "India", "Brazil")
VERBS = ("prepare", "audit", "reconcile", "draft", "publish", "triage", "migrate", "summarize", "validate", "archive")
QUERY_VERBS = {
    "prepare": ("put together", "get ready"),
    "audit": ("review", "inspect"),
    "reconcile": ("match up", "balance"),
    "draft": ("write up", "compose"),
    "publish": ("release", "send out"),
    "triage": ("sort out", "prioritize"),
    "migrate": ("move", "transfer"),
    "summarize": ("sum up", "condense"),
    "validate": ("verify", "double-check"),
    "archive": ("file away", "store"),
}
"""Other words for each task verb, so a query does not repeat its target's wording."""
SYNONYMS = {
    "check": ("check", "verify", "confirm"),
    "load": ("load", "read", "import"),
    "save": ("save", "write", "store"),
    "every": ("every", "each", "all"),
    "make sure": ("make sure", "ensure", "confirm"),
    "create": ("create", "make", "set up"),
    "send": ("send", "email", "forward"),
    "before": ("before", "prior to"),
    "column": ("column", "field"),
    "quickly": ("quickly", "promptly", "right away"),
    "the team": ("the team", "your team", "the owners"),
}

ROUTINES = {
    "csv-intake": (
        "## Load the input table\n\n"
        "1. Load `{artifact}.csv` and check that every column has a header.\n"
        "2. Normalize the headers to lower case and save the cleaned table as `{artifact}-clean.csv`.\n"
        "3. Check that the row count of `{artifact}-clean.csv` equals the row count of `{artifact}.csv`.\n"
    ),
    "pull-request": (
        "## Open a pull request\n\n"
        "1. Create a branch named after the task and commit the changes.\n"
        "2. Push the branch and open a pull request that links the tracking issue.\n"
        "3. Check that the pull request pipeline passes before asking for review.\n"
    ),
    "environment": (
        "## Prerequisites\n\n"
        "Make sure Python 3.11 is installed before you begin. Create a virtual environment and install the\n"
        "requirements quickly:\n\n```bash\npython -m venv .venv\npip install -r requirements.txt\n```\n"
    ),
    "notify": (
        "## Notify the owners\n\n"
        "1. Send the summary report to the team with the link to `{artifact}-summary.md`.\n"
        "2. Check that every recipient acknowledged the report.\n"
    ),
    "backup": (
        "## Back up before changing anything\n\n"
        "1. Export the current `{artifact}` records to `{artifact}-backup.json` before you change them.\n"
        "2. Store the backup in the team archive and note its path in the ticket.\n"
        "3. Check that the backup opens and holds every record.\n"
    ),
    "access": (
        "## Request access\n\n"
        "Ask the system owner for read and write access to the {artifact} workspace. Access requests take up\n"
        "to a day; make sure you have it before the work starts, and never borrow another person's credentials.\n"
    ),
    "review": (
        "## Review checklist\n\n"
        "- Every number in `{artifact}-summary.md` matches its source.\n"
        "- Dates use ISO 8601 and the time zone is stated.\n"
        "- Names of people and customers are spelled as in the source system.\n"
        "- The summary says what changed, why, and who approved it.\n"
    ),
    "schedule": (
        "## Schedule the recurring run\n\n"
        "1. Create a weekly job that runs this procedure every Monday at 09:00.\n"
        "2. Send the job's report to the team and link it from the runbook.\n"
        "3. Check after the first run that the report arrived.\n"
    ),
    "troubleshoot-auth": (
        "## Troubleshooting\n\n"
        "If the API call fails with 401, refresh the token and retry once. If it fails again, stop and report\n"
        "the error to the team quickly.\n"
    ),
}


@dataclass(frozen=True)
class SyntheticSkill:
    name: str
    files: dict[str, bytes]
    folder: str
    task: str
    """The words of its task: `reconcile the invoice (finance)`."""
    routines: dict[str, str]
    """The shared routines planted in it: name -> the paraphrased text it got."""


@dataclass(frozen=True)
class Query:
    text: str
    target: str
    """The skill it asks for."""


def generate_library(size: int, seed: int = 0, references: bool = False) -> list[SyntheticSkill]:
    """`size` skills with unique names; the same size and seed give the same bytes. With `references`, three
    skills in five keep worked examples and edge cases in `references/details.md`, linked from SKILL.md (the
    skills without stay byte for byte what they are without the flag)."""
    rng = random.Random(seed)
    detail_rng = random.Random(f"{seed}:references")
    tasks = [(verb, obj, domain) for domain, objects in DOMAINS.items() for obj in objects for verb in VERBS]
    places = [(system, region) for region in REGIONS for system in SYSTEMS]
    skills = []
    for index in range(size):
        verb, obj, domain = tasks[index % len(tasks)]
        system, region = places[(index // len(tasks)) % len(places)]
        round_ = index // (len(tasks) * len(places))
        name = f"{verb}-{obj.replace(' ', '-')}-{system.lower()}-{region.lower()}" + (f"-{round_}" if round_ else "")
        chosen = sorted(rng.sample(sorted(ROUTINES), k=rng.randint(2, 6)))
        where = f"{system} {region}"
        text, routines = _skill_md(rng, name, verb, obj, domain, where, chosen)
        task = f"{verb} the {obj} in {where} ({domain})"
        files = {f"{name}/SKILL.md": text}
        if references and detail_rng.random() < 0.6:
            files[f"{name}/SKILL.md"] += f"\n## Details\n\nWorked examples and edge cases: {DETAILS_LINK}.\n"
            files[f"{name}/references/details.md"] = _details(detail_rng, verb, obj, system, region)
        encoded = {path: content.encode() for path, content in files.items()}
        skills.append(SyntheticSkill(name, encoded, name, task, routines))
    return skills


DETAILS_LINK = "[references/details.md](references/details.md)"
QUARTERS = ("Q1", "Q2", "Q3", "Q4")
STATUSES = ("pending", "on hold", "disputed", "unmatched", "late")
REASONS = ("block the period close", "carry the largest amounts", "were flagged by the last audit", "are oldest")
DATE_FORMATS = ("DD.MM.YYYY", "MM/DD/YY", "Unix timestamps", "week numbers")
FLAGS = ("intercompany", "legacy", "manual-override", "test-data", "escalated")


def _details(rng: random.Random, verb: str, obj: str, system: str, region: str) -> str:
    """A reference with what SKILL.md leaves out: a worked example, edge cases and the fields, all particular
    to one skill (its system, region and made-up records)."""
    artifact = obj.replace(" ", "-")
    quarter, status, first, second = (
        rng.choice(QUARTERS),
        rng.choice(STATUSES),
        rng.randint(100, 999),
        rng.randint(100, 999),
    )
    names = rng.sample(("owner", "amount", "currency", "cost center", "due date", "approver", "region", "batch"), k=4)
    fields = "\n".join(f"| {f} | {rng.choice(('text', 'date', 'amount', 'code'))} |" for f in names)
    return (
        f"# {verb.capitalize()} the {obj}: details\n\n"
        f"## Worked example for {region} {quarter}\n\n"
        f"1. Export the {obj} entries of {system} for {region} whose status is {status}.\n"
        f"2. {verb.capitalize()} entries {artifact}-{first} and {artifact}-{second} first: they "
        f"{rng.choice(REASONS)}.\n"
        f'3. Record the outcome in `{artifact}-summary.md` under "{region} {quarter}".\n\n'
        f"## Edge cases in {system}\n\n"
        f"- {system} exports dates as {rng.choice(DATE_FORMATS)}; convert them before comparing entries.\n"
        f"- Entries marked {rng.choice(FLAGS)} belong to another team: skip them and list their ids.\n\n"
        f"## Fields\n\n| field | type |\n|---|---|\n{fields}\n"
    )


def generate_queries(skills: list[SyntheticSkill], count: int, seed: int = 0) -> list[Query]:
    """Queries that ask for a sampled skill's task with another verb and without its domain's name."""
    rng = random.Random(seed + 1)
    chosen = rng.sample(skills, k=min(count, len(skills)))
    openers = ("I need to", "Please help me", "How do I", "Can you")
    queries = []
    for skill in chosen:
        verb, rest = skill.task.rsplit(" (", 1)[0].split(" ", 1)
        queries.append(Query(f"{rng.choice(openers)} {rng.choice(QUERY_VERBS[verb])} {rest}", skill.name))
    return queries


def _skill_md(
    rng: random.Random, name: str, verb: str, obj: str, domain: str, where: str, routines: list[str]
) -> tuple[str, dict[str, str]]:
    """The SKILL.md, and the text each planted routine got in it."""
    artifact = obj.replace(" ", "-")
    parts = [
        f"---\nname: {name}\ndescription: {verb.capitalize()} the {obj} for the {domain} team in {where}, step by "
        "step, with checks.\n---\n",
        f"# {verb.capitalize()} the {obj}\n\nThis skill helps you {verb} the {obj} in {domain} work.\n",
        f"## When to use\n\nUse it when someone asks to {verb} or {QUERY_VERBS[verb][0]} a {obj} of {where}.\n",
    ]
    planted = {r: _paraphrase(rng, ROUTINES[r].format(artifact=artifact)) for r in routines if r != "troubleshoot-auth"}
    body = list(planted.values())
    unique = (
        f"## {verb.capitalize()} the {obj}\n\n"
        f"1. Read `{artifact}.json` and list what to {verb}.\n"
        f"2. {verb.capitalize()} each {obj} entry and save the result as `{artifact}-summary.md`.\n"
        f"3. Check that `{artifact}-summary.md` covers every entry of `{artifact}.json`.\n"
    )
    body.insert(rng.randrange(len(body) + 1), unique)
    parts += [_background(rng, verb, obj, domain, where), *body, _examples(rng, verb, obj, artifact, where)]
    if "troubleshoot-auth" in routines:
        planted["troubleshoot-auth"] = _paraphrase(rng, ROUTINES["troubleshoot-auth"])
        parts.append(planted["troubleshoot-auth"])
    parts.append(f"## Output\n\nReturn `{artifact}-summary.md` and a one-line status for the {obj}.\n")
    return "\n".join(parts), planted


FACTS = (
    "{where} keeps its {obj} records in {system_kind} and closes each period on the {day} working day.",
    "Most {obj} work in {where} is done by {people} people, and {share}% of entries need a second look.",
    "Past mistakes came from {mistake}, so the procedure below checks for it explicitly.",
    "The {domain} team asked for this procedure after {event}.",
    "Entries older than {months} months are read-only and must not be changed.",
)
FILLERS = {
    "system_kind": ("a shared spreadsheet", "the ERP", "a ticket queue", "a data warehouse", "a document store"),
    "day": ("first", "third", "fifth", "last"),
    "mistake": ("duplicate entries", "stale exchange rates", "missing approvals", "wrong time zones", "typos in names"),
    "event": ("an audit finding", "a customer complaint", "a missed deadline", "a reorganization", "a new regulation"),
}


def _background(rng: random.Random, verb: str, obj: str, domain: str, where: str) -> str:
    facts = rng.sample(FACTS, k=3)
    values: dict[str, object] = {key: rng.choice(choices) for key, choices in FILLERS.items()}
    values |= {"people": rng.randint(2, 40), "share": rng.randint(3, 30), "months": rng.randint(3, 24)}
    text = " ".join(f.format(obj=obj, domain=domain, where=where, **values) for f in facts)
    return f"## Background\n\n{text}\n"


def _examples(rng: random.Random, verb: str, obj: str, artifact: str, where: str) -> str:
    rows = "\n".join(
        f"| {artifact}-{rng.randint(1000, 9999)} | {rng.choice(('open', 'done', 'blocked'))} | {rng.randint(1, 28)} |"
        for _ in range(rng.randint(3, 6))
    )
    return (
        f'## Examples\n\nA typical request: "please {verb} the {obj} for {where} before Friday". '
        f"Entries look like this:\n\n| id | status | day |\n|---|---|---|\n{rows}\n"
    )


def _paraphrase(rng: random.Random, text: str) -> str:
    for word, choices in SYNONYMS.items():
        text = text.replace(word, rng.choice(choices))
    return text
