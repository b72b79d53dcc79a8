/**
 * Jailbreak detectors: text that tries to talk the model out of its safety rules (DAN and its
 * cousins, "developer mode", role-play that removes restrictions, refusal suppression). Phrases
 * match the normalized text (see normalize.ts). Words that also occur in harmless questions
 * ("jailbreak my phone", "enable developer mode on Android") carry weights below the default
 * threshold, so they count only together with other evidence.
 */
import type { Detector } from './detector.ts';
import { any, opt, phrase, phraseFinder, upTo } from './phrases.ts';

const LABEL = 'JAILBREAK';

const BECOME = any(
  'you are | youre | you re | you will be | you are now | act as | acting as',
  'pretend to be | roleplay as | role play as | play the role of | become',
  'simulate | stay | you will act as | respond as | answer as',
);
const PERSONA = any(
  'dan | betterdan | better dan | stan | aim | mongo tom | evilbot | evil bot',
  'anti dan | chaosgpt | wormgpt | freedomgpt',
);
const MODE = any(
  'developer | dev | god | jailbreak | jailbroken | unrestricted | unfiltered',
  'uncensored | evil | sudo | opposite | unlocked | dan | chaos',
);
const RESTRICTIONS = any(
  'restrictions | restriction | limitations | limits | filters | filter | filtering',
  'censorship | guidelines | boundaries | rules | policies | policy | constraints',
  'morals | ethics | principles | safeguards | guardrails | content policy',
  'moderation',
);
const YOU = any('you | your ai | the ai | the assistant | the model | chatgpt');
const BEING = any(
  'are | is | now | have | has | been | will | be | completely | totally | fully',
  'truly | officially',
);
const NOT = any('no longer | not | never | nt');
const THE = any('any | all | the | your | its | of | their | these');
const DISABLE = any(
  'disable | remove | turn off | switch off | bypass | circumvent | deactivate',
  'break | lift | drop | ignore | override | get around | evade',
);
const SAFEGUARDS = any(
  'filters | filter | restrictions | safeguards | censorship | guardrails',
  'content policy | moderation | ethics | morals | limitations | safety',
);
const KIND = any(
  'ethical | moral | content | safety | openai | anthropic | usual | typical',
  'normal | standard | programming | built in',
);

const dan: Detector = {
  id: 'dan',
  family: 'jailbreak',
  description: '"Do Anything Now" and other named jailbreak personas (DAN, STAN, AIM, Mongo Tom...).',
  ...phraseFinder(LABEL, [
    {
      weight: 0.9,
      phrases: [
        phrase([any('do anything now')]),
        phrase([any('always intelligent and machiavellian')]),
        phrase([BECOME, opt(any('now')), opt(any('a', 'an', 'the')), PERSONA], { wholeWord: true }),
        phrase([any('dan | stan | dude | aim'), any('mode', 'prompt', 'jailbreak')], { wholeWord: true }),
      ],
    },
  ]),
};

const developerMode: Detector = {
  id: 'developer_mode',
  family: 'jailbreak',
  description: '"Developer mode", "god mode" and similar pretend modes that lift the rules.',
  ...phraseFinder(LABEL, [
    {
      weight: 0.85,
      phrases: [
        phrase([MODE, any('mode'), any('enabled | activated | engaged | unlocked | output | response')], {
          wholeWord: true,
        }),
        phrase([
          any(
            'enable | activate | enter | switch to | turn on | unlock | simulate | you are in',
            'youre in | now in | with | act as | pretend to be in | stay in',
          ),
          opt(any('the', 'a')),
          any(
            'god | jailbreak | jailbroken | unrestricted | unfiltered | uncensored | evil',
            'sudo | opposite | dan | chaos',
          ),
          any('mode'),
        ]),
        phrase([
          any('chatgpt | gpt | claude | ai | assistant | model'),
          any('with'),
          any('developer', 'dev', 'god'),
          any('mode'),
        ]),
      ],
    },
    {
      // "developer mode" also appears in phone and browser questions.
      weight: 0.35,
      phrases: [phrase([any('developer', 'dev'), any('mode')])],
    },
  ]),
};

const restrictionRemoval: Detector = {
  id: 'restriction_removal',
  family: 'jailbreak',
  description: 'Claims or asks that the model be free of its rules, filters or ethics.',
  ...phraseFinder(LABEL, [
    {
      weight: 0.85,
      phrases: [
        phrase([
          YOU,
          upTo(3, BEING),
          NOT,
          any('bound by | restricted by | limited by | subject to | constrained by | held to'),
          upTo(3, THE),
          upTo(2, KIND),
          RESTRICTIONS,
        ]),
        phrase([
          YOU,
          upTo(3, BEING),
          any(
            'free from | free of | freed from | released from | liberated from',
            'unshackled from | broken free of | broke free of | exempt from | escaped',
          ),
          upTo(3, THE),
          upTo(2, KIND),
          RESTRICTIONS,
        ]),
        phrase([DISABLE, upTo(2, THE), any('your'), upTo(2, KIND), SAFEGUARDS]),
        phrase([DISABLE, upTo(3, THE), KIND, opt(KIND), SAFEGUARDS]),
      ],
    },
    {
      weight: 0.75,
      phrases: [
        phrase([
          any('you have | you ve | youve | you now have | you will have | you possess'),
          any('no'),
          upTo(2, KIND),
          RESTRICTIONS,
        ]),
        phrase([any('without'), upTo(2, any('any', 'the', 'your')), KIND, RESTRICTIONS]),
      ],
    },
    {
      // "uncensored model" also comes up in questions about models; weaker.
      weight: 0.6,
      phrases: [
        phrase(
          [
            any('uncensored | unfiltered | unrestricted | amoral | unethical | unbound', 'unaligned | jailbroken'),
            any('ai | assistant | model | chatbot | bot | llm | gpt | chatgpt | persona'),
          ],
          { wholeWord: true },
        ),
      ],
    },
    {
      // Talking about jailbreaks is not one; on its own this stays below the default threshold.
      weight: 0.4,
      phrases: [phrase([any('jailbreak', 'jailbroken', 'jailbreaking')])],
    },
  ]),
};

const roleplayOverride: Detector = {
  id: 'roleplay_override',
  family: 'jailbreak',
  description: 'Role-play or hypotheticals used to drop the rules ("pretend you have no restrictions").',
  ...phraseFinder(LABEL, [
    {
      weight: 0.85,
      phrases: [
        phrase([
          any('pretend | imagine | suppose | assume | act | behave | respond | answer | reply'),
          opt(any('that', 'as if', 'like')),
          any('you'),
          any('are | were | have | had'),
          opt(any('an', 'a')),
          any('no | not | zero | ai without | assistant without | unrestricted | unfiltered', 'uncensored | free of'),
          opt(any('any')),
          upTo(2, KIND),
          RESTRICTIONS,
        ]),
        phrase([
          any('roleplay as | role play as | pretend to be | act as | play'),
          opt(any('an', 'a')),
          any('unrestricted | unfiltered | uncensored | evil | amoral | malicious | rogue', 'unethical'),
          any('ai | assistant | model | chatbot | character | version'),
        ]),
      ],
    },
    {
      weight: 0.7,
      phrases: [
        phrase(
          [
            any('you are no longer | you are not | youre not | youre no longer | stop being'),
            opt(any('an', 'a')),
            any('ai | assistant | chatgpt | language model | ai language model | claude'),
          ],
          { wholeWord: true },
        ),
      ],
    },
    {
      weight: 0.6,
      phrases: [
        phrase([
          any(
            'never | do not | dont | you cannot | you cant | you must not | you will not',
            'you wont | you are not allowed to | without',
          ),
          any('refuse | refusing | decline | declining | say no | say you cant', 'say that you cant'),
        ]),
      ],
    },
    {
      // Keeping a role is what benign role-play prompts ask too ("act as a chess opponent… do not
      // break character"): evidence only together with something else.
      weight: 0.45,
      phrases: [
        phrase([any('stay in character', 'remain in character', 'keep in character')]),
        phrase([any('never | do not | dont | without'), any('break', 'breaking'), any('character')]),
        phrase([
          any('never | do not | dont | without'),
          any('add | include | give | mention | adding | including'),
          opt(any('any')),
          any('warnings | disclaimers | ethical considerations | moral lectures'),
        ]),
      ],
    },
  ]),
};

export const jailbreakDetectors: Detector[] = [dan, developerMode, restrictionRemoval, roleplayOverride];
