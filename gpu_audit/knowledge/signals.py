"""How a process killed with SIGKILL looks from the outside: the shell's word, exit statuses.

When the kernel's OOM killer (or a scheduler) kills a job with SIGKILL, the job cannot report
it; its shell or launcher does. Bash and sh print the C library's description of the signal,
translated into the shell's locale (glibc's ``strsignal(SIGKILL)``), on a line of its own or
after the job number / ``line N: PID``; zsh prints ``killed`` in English whatever the locale.
Launchers report the exit status 128 + 9 = 137, or a negative return code -9 (Python's
``subprocess``, torchrun's ``exitcode: -9``).
"""

from __future__ import annotations

import re

SIGKILL = 9
SIGKILL_EXIT_STATUS = 128 + SIGKILL  # a shell's or container runtime's exit status

# glibc's strsignal(SIGKILL) by locale (its libc.mo message catalogues), as bash prints it in a
# shell of that language.
KILLED_WORDS: dict[str, str] = {
    "en": "Killed",
    "be": "Забіты",
    "bg": "Безусловно прекъснат",
    "ca": "Matat",
    "cs": "Zabit (SIGKILL)",
    "da": "Dræbt",
    "de": "Getötet",
    "el": "Σκοτώθηκε",
    "eo": "Buĉita",
    "es": "Terminado (killed)",
    "fi": "Tapettu",
    "fr": "Processus arrêté",
    "gl": "Matado",
    "hr": "Ubijen",
    "hu": "Kilőve",
    "id": "Terbunuh",
    "it": "Ucciso",
    "ja": "強制終了",
    "ko": "죽었음",
    "lt": "Nutraukta (killed)",
    "nb": "Drept",
    "nl": "Geëlimineerd",
    "pl": "Unicestwiony",
    "pt": "Morto",
    "pt_BR": "Morto",
    "ru": "Убито",
    "sk": "Zabitý",
    "sl": "Pobit",
    "sr": "Убијен",
    "sv": "Dödad",
    "tr": "Süreç durduruldu",
    "uk": "Вбито",
    "vi": "Bị buộc kết thúc",
    "zh_CN": "已杀死",
    "zh_TW": "強制結束",
}


def killed_words_pattern() -> str:
    """A regex alternation of every locale's word (longest first, so none shadows another)."""
    words = sorted(set(KILLED_WORDS.values()), key=len, reverse=True)
    return "|".join(re.escape(word) for word in words)
