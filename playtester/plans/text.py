"""Plans from plain text: one step a line, the way a tester writes reproduction steps.

    Walk to the barrel.          → node: target a barrel
    Inspect the chair.           → node: target a chair, behaviour inspect
    Jump over the fallen log.    → node: jump where the agent stands (no class named "log")
    Go to object 7.              → node: target OOI 7;   "Head to 1200, 340." → a position
    Turn left 3 times. Wait 10 steps. Step back.
    Attack any enemy you see.    → rule: when an enemy is seen, attack

A small rule-based parser: a line with "any", "every", "whenever", "each" or "if/when you see"
is a rule, anything else a node. The first word is the verb, matched to the key map's actions and
the named behaviours through near-synonyms (and close spellings); nouns are matched to the
detector's classes the same way. A verb it cannot place is an error naming the line.
Rules listed first get the higher priority, unless a line says "priority N".
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Sequence

from playtester.errors import UserError
from playtester.datasets.plans import Condition, Node, Plan, Rule, Target

VERB_SYNONYMS: dict[str, tuple[str, ...]] = {
    "go": ("go", "walk", "run", "head", "approach", "travel", "proceed", "navigate", "reach", "find", "move", "return"),
    "jump": ("jump", "hop", "leap", "vault", "bound"),
    "inspect": ("inspect", "examine", "check", "circle", "study", "observe", "test", "review"),
    "attack": ("attack", "shoot", "fire", "hit", "strike", "kill", "fight"),
    "use": ("use", "activate", "interact", "press", "open", "toggle", "push", "pull", "flip"),
    "turn": ("turn", "rotate", "spin"),
    "look": ("look", "glance", "tilt"),
    "step": ("step", "strafe", "back", "backup", "sidestep", "retreat"),
    "wait": ("wait", "pause", "stay", "stand", "idle", "hold"),
    "crouch": ("crouch", "duck", "kneel"),
}
"""Canonical verb → the words that mean it."""

CLASS_SYNONYMS: dict[str, tuple[str, ...]] = {
    "pillar": ("pillar", "rock", "column", "stone", "post"),
    "barrel": ("barrel", "drum", "cask", "keg"),
    "tire": ("tire", "tyre", "wheel"),
    "chair": ("chair", "seat", "bench", "stool"),
    "enemy": ("enemy", "monster", "foe", "opponent", "hostile"),
}
"""Detector class → nouns that name it (a class not listed here is matched by its own name)."""

DIRECTIONS = {"forward": "forward", "forwards": "forward", "ahead": "forward", "back": "backward", "backward": "backward",
              "backwards": "backward", "left": "left", "right": "right", "up": "up", "down": "down", "around": "around"}
RULE_WORDS = re.compile(r"\b(any|every|whenever|each|all)\b|\b(if|when) you see\b")
NUMBER_WORDS = {"once": 1, "twice": 2, "thrice": 3, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                "seven": 7, "eight": 8, "nine": 9, "ten": 10}
FILLER = {"then", "now", "please", "next", "finally", "first", "and", "also"}
TURN_AROUND_STEPS = 15
"""Turn steps for "turn around" (about 12° a step on the park)."""


def _tokens(line: str) -> list[str]:
    return re.findall(r"[a-z]+|-?\d+(?:\.\d+)?", line.lower())


def _singular(word: str) -> str:
    for end, repl in (("ies", "y"), ("es", ""), ("s", "")):
        if word.endswith(end) and len(word) > len(end) + 2:
            return word[: -len(end)] + repl
    return word


class TextParser:
    """Turns lines into nodes and rules for one key map, set of behaviours and set of classes."""

    def __init__(self, actions: Sequence[str], classes: Sequence[str], behaviors: Sequence[str] = ("inspect",),
                 fps: float = 35 / 4) -> None:
        self.actions = list(actions)
        self.behaviors = list(behaviors)
        self.classes = list(classes)
        self.fps = fps
        self.verbs: dict[str, str] = {}
        for canon, words in VERB_SYNONYMS.items():
            for w in words:
                self.verbs.setdefault(w, canon)
        for name in self.actions + self.behaviors:  # the key map's own names are verbs too
            self.verbs.setdefault(name.split("_")[0], name)
        self.nouns: dict[str, str] = {}
        for cls in self.classes:
            for w in CLASS_SYNONYMS.get(cls, ()) + (cls,):
                self.nouns[w] = cls

    # -- words --------------------------------------------------------------------------------
    def _verb(self, word: str, where: str) -> str:
        if word in self.verbs:
            return self.verbs[word]
        near = difflib.get_close_matches(word, list(self.verbs), n=1, cutoff=0.75)
        if near:
            return self.verbs[near[0]]
        known = ", ".join(["walk", *VERB_SYNONYMS, *(a for a in self.actions + self.behaviors if a not in VERB_SYNONYMS)])
        raise UserError(f"{where}: unknown verb {word!r}; start the line with one of {known} (or a near synonym)")

    def _noun(self, words: list[str]) -> str | None:
        for w in words:
            for candidate in (w, _singular(w)):
                if candidate in self.nouns:
                    return self.nouns[candidate]
        for w in words:
            if len(w) >= 4:
                near = difflib.get_close_matches(_singular(w), list(self.nouns), n=1, cutoff=0.85)
                if near:
                    return self.nouns[near[0]]
        return None

    def _action(self, name: str, where: str, verb: str) -> str:
        if name in self.actions or name in self.behaviors:
            return name
        raise UserError(f"{where}: {verb!r} needs an action or behaviour named {name!r}; the key map has "
                        f"{', '.join(self.actions)} and the behaviours are {', '.join(self.behaviors) or 'none'}")

    @staticmethod
    def _count(words: list[str]) -> int | None:
        for i, w in enumerate(words):
            if w in NUMBER_WORDS and (w in ("once", "twice", "thrice") or i + 1 < len(words) and words[i + 1] in ("times", "steps", "seconds", "time")):
                return NUMBER_WORDS[w]
            if re.fullmatch(r"\d+", w) and i + 1 < len(words) and words[i + 1] in ("times", "steps", "seconds", "time", "step", "second"):
                return int(w)
        return None

    # -- lines --------------------------------------------------------------------------------
    def line(self, text: str, where: str) -> Node | Rule:
        """One line as a node or a rule."""
        name = re.sub(r"^\s*(?:\d+[.)]|[-*•])\s*", "", text).strip().rstrip(".!")
        words = [w for w in _tokens(name) if w not in FILLER]
        if not words:
            raise UserError(f"{where}: nothing to do on this line")
        verb_word = words[0]
        if verb_word == "look" and len(words) > 1 and words[1] in ("at", "around"):
            verb_word = "inspect"  # "look at the chair" is an inspection
        verb = self._verb(verb_word, where)
        rest = words[1:]
        priority = re.search(r"\bpriority (\d+)\b", text.lower())
        if RULE_WORDS.search(text.lower()):
            return self._rule(verb, rest, name, where, int(priority.group(1)) if priority else None)
        return self._node(verb, verb_word, rest, name, where)

    def _direction_action(self, verb: str, rest: list[str], where: str) -> tuple[str, int]:
        direction = next((DIRECTIONS[w] for w in rest if w in DIRECTIONS), None)
        if verb == "turn":
            if direction == "around":
                return self._action("turn_left", where, verb), TURN_AROUND_STEPS
            return self._action("turn_right" if direction == "right" else "turn_left", where, verb), 1
        if verb == "look":
            return self._action("look_down" if direction == "down" else "look_up", where, verb), 1
        if direction in ("left", "right"):
            return self._action(f"strafe_{direction}", where, verb), 1
        return self._action("forward" if direction == "forward" else "backward", where, verb), 1

    def _node(self, verb: str, verb_word: str, rest: list[str], name: str, where: str) -> Node:
        count = self._count(rest)
        if verb == "wait":
            steps = count or 10
            if "seconds" in rest or "second" in rest:
                steps = max(1, round(steps * self.fps))
            return Node(name=name, wait=steps)
        target = self._target(rest)
        if verb in ("go", "step") and target is None and any(w in DIRECTIONS for w in rest):
            verb = "step"  # "move forward 5 steps", "walk back"
        if verb == "go":
            if target is None:
                raise UserError(f"{where}: {verb_word!r} needs somewhere to go: one of {', '.join(self.classes)}, "
                                f"'object N' or 'X, Y'")
            return Node(name=name, target=target)
        if verb in ("turn", "look", "step"):
            action, repeat = self._direction_action(verb, rest, where)
            return Node(name=name, action=action, repeat=count or repeat)
        action = self._action(verb, where, verb_word)
        repeat = 0 if action in self.behaviors else (count or 1)
        return Node(name=name, target=target, action=action, repeat=repeat)

    def _target(self, rest: list[str]) -> Target | None:
        for i, w in enumerate(rest[:-1]):
            if w in ("object", "ooi", "number") and re.fullmatch(r"\d+", rest[i + 1]):
                return Target(ooi=int(rest[i + 1]))
        numbers = [w for w in rest if re.fullmatch(r"-?\d+(?:\.\d+)?", w)]
        kind = self._noun(rest)
        if kind is not None:
            return Target(kind=kind)
        if len(numbers) >= 2 and not any(w in ("times", "steps", "seconds") for w in rest):
            return Target(position=(float(numbers[0]), float(numbers[1])))
        return None

    def _rule(self, verb: str, rest: list[str], name: str, where: str, priority: int | None) -> Rule:
        kind = self._noun(rest)
        if kind is None:
            raise UserError(f"{where}: a rule needs something to see; name one of {', '.join(self.classes)}")
        if verb in ("turn", "look", "step"):
            action, repeat = self._direction_action(verb, rest, where)
        elif verb in ("go", "wait"):
            raise UserError(f"{where}: a rule performs an action; {verb!r} is not one (use a node line instead)")
        else:
            action = self._action(verb, where, verb)
            repeat = 0 if action in self.behaviors else 1
        rule = Rule(name=name, when=[Condition(see=kind)], action=action, repeat=repeat)
        rule.priority = -1 if priority is None else priority  # filled in by order below
        return rule

    def parse(self, text: str, source: str = "text") -> Plan:
        """Every non-blank, non-comment line of `text` as nodes and rules, in order."""
        nodes: list[Node] = []
        rules: list[Rule] = []
        for n, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
            item = self.line(raw, f"{source} line {n}")
            (rules if isinstance(item, Rule) else nodes).append(item)
        if not nodes:
            raise UserError(f"{source}: no steps found; write one step a line (e.g. 'Walk to the barrel.')")
        for i, rule in enumerate(rules):
            if rule.priority < 0:
                rule.priority = len(rules) - i  # listed first, weighs most
        return Plan(name=Path(source).stem, nodes=nodes, rules=rules)


def plan_from_text(path: str | Path, *, actions: Sequence[str], classes: Sequence[str],
                   behaviors: Sequence[str] = ("inspect",), fps: float = 35 / 4) -> Plan:
    """A plan from a text file of steps; an unreadable line is an error naming its number."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"steps file {path}: not found") from None
    except UnicodeDecodeError:
        raise UserError(f"steps file {path}: not text (UTF-8)") from None
    return TextParser(actions, classes, behaviors, fps).parse(text, str(path))
