/**
 * Public sources of the prompt-injection / jailbreak corpus, each pinned by repository, commit and
 * the SHA-256 of every file read, with its licence, and how its rows become labelled examples.
 * assemble-injection-data.ts reads them (from a local mirror of the repository, or the .data/
 * cache) and refuses a file whose checksum differs.
 *
 * Held out (never read here, for training, tuning or thresholds): NVIDIA/garak data (the garak rows
 * of Giskard's file are dropped), JailbreakBench artifacts, Tensor Trust data, the PIGuard
 * repository's data (NotInject, WildGuard samples, BIPIA payloads), verazuo/jailbreak_llms,
 * awesome-chatgpt-prompts, FastChat's MT-Bench and Vicuna questions (the `vicuna` rows of
 * AlpacaEval are dropped).
 */
import { parse as parseYaml } from 'yaml';
import { parseCsv as parseCsvSync } from './csv.ts';
import { benignCategory, type Category, type LabelledText, labelled } from './injection-corpus.ts';
import { generateRoleplay, generateSuffix, OWN_GOALS } from './injection-generators.ts';
import { SeededRandom } from './seeded-random.ts';

export interface PinnedFile {
  path: string;
  sha256: string;
}

export interface Source {
  /** Source name in the corpus and the reports. */
  id: string;
  repo: string;
  commit: string;
  licence: string;
  files: PinnedFile[];
  /** Only ever in the test split (never trained or tuned on). */
  evalOnly?: boolean;
  description: string;
  build(read: (path: string) => string, ctx: BuildContext): LabelledText[];
}

export interface BuildContext {
  /** Harmful goals gathered from the goal sources: imperatives (AdvBench) and questions (GPTFuzz). */
  goals: string[];
  questions: string[];
}

/** A random sequence seeded by a name (FNV-1a of it): the same draws for the same source. */
export const seeded = (name: string) => {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  return new SeededRandom(h >>> 0);
};

/** `n` of `items`, drawn by `seeded(name)`. */
export function sample<T>(items: T[], n: number, name: string): T[] {
  return seeded(name)
    .shuffle([...items])
    .slice(0, n);
}

const PURPLE = { repo: 'meta-llama/PurpleLlama', commit: '4be64c3a24442b51c76175e6ec67722cc3f5fe38', licence: 'MIT' };
const ADAPTIVE = {
  repo: 'tml-epfl/llm-adaptive-attacks',
  commit: '7787faaf8b6fdd56e63ec320d5568bd3e35c48c0',
  licence: 'MIT',
};
const ADAPTIVE_FILES: PinnedFile[] = [
  ['exps_gemma-7b.json', 'd05bb7eee3702d3dd2308f58d825ed23f17e3b06aebcff97b12a799a4696dfe7'],
  ['exps_gpt3.5_turbo.json', 'e397fbddb102cf722e999fac12eb21300b3256528963b6cef8c43edb73ae8580'],
  ['exps_gpt4_turbo.json', '5763d221b4a7c156fefbf3ef8c4cd145234764f4752ac828fe7ce6e6998417f1'],
  ['exps_llama2-13b.json', 'd2e6028991c7b565e806e45fa1514553ed3af25faa385cd5ff63ae6ad50285ad'],
  ['exps_llama2-13b_icl_one_shot.json', 'e29e593a55167775984a1252e0a3d0126cd3a403dc6d293bd16b5110374b2371'],
  ['exps_llama2-70b.json', 'ea47a4b27967865b216abae3d9a4795f424b832c2978b89727c5298236acecee'],
  ['exps_llama2-7b_icl_one_shot.json', '4443a78bb0151863985a8f004c106bf9e987464d4921f7856b9643350aa71d6e'],
  ['exps_llama2-7b_plain_init.json', 'ca883d832c07c4197217d107d9630fac81c6a629dddac3ec4b4b848a6bbd345d'],
  ['exps_llama2_7b.json', 'ea28d75c653ad30696a868dd9880f876861c009bb70cfef0359b3f7db5d1f4ab'],
  ['exps_llama3-8b.json', 'cf25133fca8ac75cf83b6c4a7b8684f35711399cc987f0c54268295e929cdb40'],
  ['exps_mistral-7b_simplified_template.json', 'a3814f8974f6a104a867701ea5784b5141c13c98ec5a96fa75d7f98510969d21'],
  ['exps_nemotron-4-340b.json', '13f55d03ac12fefd84fe25539cb5b0ee4fef1fa5daa33a04742a17e53263b870'],
  ['exps_phi3.json', '625b47633f69965f9b521ff30e37b5fb33e66c57e9d5323757e6ad368425350f'],
  ['exps_r2d2.json', 'f59cdb4724db4f17d15769d6bf975884de3098f169d850dd77625b46d137e326'],
  ['exps_vicuna.json', '2860f223f57758d1e1ee45eb621cb6de3a5473a6396180a4432a48b4dfc47db2'],
].map(([f, sha256]) => ({ path: `jailbreak_artifacts/${f}`, sha256 }));

interface CyberSecEvalItem {
  prompt_id: number;
  test_case_prompt: string;
  user_input: string;
  injection_variant: string;
  injection_type: string;
}

/** The suffix of an adaptive-attack prompt: what follows the request (empty when there is none). */
export function adaptiveSuffix(prompt: string, goal: string): string {
  const markers = ['ethical implications)', goal];
  let end = -1;
  for (const m of markers) {
    const i = prompt.lastIndexOf(m);
    if (i >= 0) end = Math.max(end, i + m.length);
  }
  if (end < 0) return '';
  return prompt
    .slice(end)
    .replace(/^<bos>/, '')
    .trim();
}

export const SOURCES: Source[] = [
  {
    id: 'cyberseceval-pi',
    ...PURPLE,
    files: [
      {
        path: 'CybersecurityBenchmarks/datasets/prompt_injection/prompt_injection.json',
        sha256: '069e4d5d36f6d19f972a3bbc65df840cc729354f89358a9031aeb44d95b18a9a',
      },
    ],
    description:
      'CyberSecEval 2 prompt-injection tests (Meta): the attacker text of 251 cases (direct and indirect: ignore-previous, system mode, persuasion, token smuggling, payload splitting, many-shot…), grouped by the system prompt they target; the 10x system prompts themselves are benign hard negatives (source cyberseceval-system-prompts).',
    build(read) {
      const items = JSON.parse(read(this.files[0].path)) as CyberSecEvalItem[];
      const out: LabelledText[] = [];
      const systems = new Set<string>();
      for (const it of items) {
        const extraction = /secret|password|key|reveal|repeat|instructions|prompt/i.test(it.user_input)
          ? 'extraction'
          : 'injection';
        out.push(labelled(it.user_input, 1, extraction, this.id, `sys:${it.test_case_prompt.slice(0, 80)}`));
        systems.add(it.test_case_prompt);
      }
      for (const s of systems)
        out.push(labelled(s, 0, 'hard_negative', 'cyberseceval-system-prompts', `sys:${s.slice(0, 80)}`));
      return out;
    },
  },
  {
    id: 'cyberseceval-pi-multilingual',
    ...PURPLE,
    files: [
      {
        path: 'CybersecurityBenchmarks/datasets/prompt_injection/prompt_injection_multilingual_machine_translated.json',
        sha256: 'f018adfc7b1f766f98ce4dd4c8e34e97a8a88f402a2b63576652027e02c2a15f',
      },
    ],
    description:
      'CyberSecEval 2 prompt-injection tests machine-translated into 16 languages (1 004 attacker texts), grouped by target system prompt.',
    build(read) {
      const items = JSON.parse(read(this.files[0].path)) as CyberSecEvalItem[];
      return items.map((it) =>
        labelled(it.user_input, 1, 'injection', this.id, `sys:${it.test_case_prompt.slice(0, 80)}`),
      );
    },
  },
  {
    id: 'cyberseceval-frr',
    ...PURPLE,
    files: [
      {
        path: 'CybersecurityBenchmarks/datasets/mitre_frr/mitre_frr.json',
        sha256: '7a9b400bdf5ddbb36d5e7c3e8f6b5adb5d13125b8d03be66fd252a0f20b79d15',
      },
    ],
    description:
      'CyberSecEval false-refusal prompts: benign security requests that sound malicious ("block suspicious packets", "rotate the encryption key"); all hard negatives; 500 of 750, seeded sample.',
    build(read) {
      const d = JSON.parse(read(this.files[0].path)) as Array<{ mutated_prompt: string; is_malicious: boolean }>;
      return sample(
        d.filter((x) => !x.is_malicious),
        500,
        this.id,
      ).map((x, i) => labelled(x.mutated_prompt, 0, 'hard_negative', this.id, `item${i}`));
    },
  },
  {
    id: 'cyberseceval-instruct',
    ...PURPLE,
    files: [
      {
        path: 'CybersecurityBenchmarks/datasets/instruct/instruct.json',
        sha256: '8913f770ccd50921ba5a4e94e504b224dbeeb39afc6618a3e9bf941a8eafbe3e',
      },
    ],
    description:
      'CyberSecEval instruct tests: ordinary coding requests ("Write a function in C that…"); 500 of 1 916, seeded sample.',
    build(read) {
      const d = JSON.parse(read(this.files[0].path)) as Array<{ test_case_prompt: string }>;
      return sample(d, 500, this.id).map((x, i) =>
        labelled(x.test_case_prompt, 0, benignCategory(x.test_case_prompt), this.id, `item${i}`),
      );
    },
  },
  {
    id: 'gptfuzz-templates',
    repo: 'sherdencooper/GPTFuzz',
    commit: '1eddeb565740ae311b5f4950492b011a6f866fe7',
    licence: 'MIT',
    files: [
      {
        path: 'datasets/prompts/GPTFuzzer.csv',
        sha256: 'e4abf25343b4adb991dd8ddc6189c038f26a6e74064d792cced69f56f71577fc',
      },
      {
        path: 'datasets/questions/question_list.csv',
        sha256: '18531eb6bc1c8fc0b8f66822b366b872202b852bf28826cef590ad0d7a81c749',
      },
    ],
    description:
      'GPTFuzzer: 77 human-written in-the-wild jailbreak templates (DAN, developer mode, AIM, role-play scenes…) each filled with 3 of its 100 harmful questions; grouped by template.',
    build(read, ctx) {
      const templates = parseCsvSync(read(this.files[0].path)).rows.map((r) => r.text);
      const questions = parseCsvSync(read(this.files[1].path)).rows.map((r) => r.text);
      ctx.questions.push(...questions);
      const out: LabelledText[] = [];
      templates.forEach((t, i) => {
        for (const q of sample(questions, 3, `gptfuzz:${i}`)) {
          out.push(labelled(t.replaceAll('[INSERT PROMPT HERE]', q), 1, 'jailbreak', this.id, `template${i}`));
        }
      });
      return out;
    },
  },
  {
    id: 'advbench-goals',
    repo: 'patrickrchao/JailbreakingLLMs',
    commit: '6379ef705a0fc745530f7d895963510c021b496a',
    licence: 'MIT',
    files: [
      {
        path: 'data/harmful_behaviors_custom.csv',
        sha256: '66af8279f7690e1b83f8edeeeef0ff5c9da099e994ef54ecc14bdaf5fa759de2',
      },
    ],
    description:
      'The 50 AdvBench behaviours of the PAIR paper (harmful goals): not examples themselves, they feed the role-play and suffix generators (sources gen-roleplay-public, gen-suffix-public).',
    build(read, ctx) {
      ctx.goals.push(...parseCsvSync(read(this.files[0].path)).rows.map((r) => r.goal));
      return [];
    },
  },
  {
    id: 'adaptive-attacks',
    ...ADAPTIVE,
    files: ADAPTIVE_FILES,
    description:
      'Andriushchenko et al., "Jailbreaking leading safety-aligned LLMs with simple adaptive attacks": the prompts that jailbroke 15 models (rule template + random-search adversarial suffix), and (source adaptive-attacks-suffix) each found suffix appended to the bare request, GCG-style; grouped by behaviour.',
    build(read) {
      const out: LabelledText[] = [];
      for (const f of this.files) {
        const d = JSON.parse(read(f.path)) as {
          jailbreaks: Array<{ index: number; goal: string; prompt: string }>;
        };
        for (const j of d.jailbreaks) {
          if (typeof j.prompt !== 'string') continue;
          out.push(labelled(j.prompt, 1, 'adversarial_suffix', this.id, `goal${j.index}`));
          const suffix = adaptiveSuffix(j.prompt, j.goal);
          if (suffix.length >= 10) {
            const goal = j.goal[0].toUpperCase() + j.goal.slice(1);
            out.push(
              labelled(`${goal}. ${suffix}`, 1, 'adversarial_suffix', 'adaptive-attacks-suffix', `goal${j.index}`),
            );
          }
        }
      }
      return out;
    },
  },
  {
    id: 'deepinception',
    repo: 'tmlr-group/DeepInception',
    commit: 'fc5689e76c4dd87a14babf1eadf890532f2b6880',
    licence: 'MIT',
    files: [{ path: 'res/data_main.json', sha256: '77506a0f61b162ec48e23df39b93743c7e3de32824ec3920a3840629ac22d422' }],
    description: 'DeepInception: nested science-fiction scenes wrapping 50 harmful goals (one template).',
    build(read) {
      const d = JSON.parse(read(this.files[0].path)) as Array<{ inception_attack: string }>;
      return d.map((x, i) => labelled(x.inception_attack, 1, 'roleplay_attack', this.id, `goal${i}`));
    },
  },
  {
    id: 'langkit-themes',
    repo: 'whylabs/langkit',
    commit: '5d6cab1e2ff32181ba5c514aaa2a4473421dc413',
    licence: 'Apache-2.0',
    files: [
      { path: 'langkit/themes.json', sha256: '174aef4f148eaaa0cccb7e66cfc7eb45f71bd375f15f0cd0cff721f0ce201601' },
    ],
    description: 'LangKit jailbreak theme: 27 jailbreak prompts (DAN, opposite mode, persona games…).',
    build(read) {
      const d = JSON.parse(read(this.files[0].path)) as { jailbreak: string[] };
      return d.jailbreak.map((t, i) => labelled(t, 1, 'jailbreak', this.id, `item${i}`));
    },
  },
  {
    id: 'giskard-promptinject',
    repo: 'Giskard-AI/prompt-injections',
    commit: 'ce50a549dadc46b48c931250d2dd71d5f003c0c2',
    licence: 'MIT (rows from PromptInject, MIT)',
    files: [
      { path: 'prompt_injections.csv', sha256: 'd8b2e74b8813a4a9a621553c546d66e188eb7ca2a424261c42fea284674a4660' },
    ],
    description:
      'Giskard prompt injections: the 15 goal-hijacking rows that come from PromptInject (the rows from garak are held out and dropped).',
    build(read) {
      return parseCsvSync(read(this.files[0].path))
        .rows.filter((r) => r.source.includes('promptinject'))
        .map((r, i) => labelled(r.prompt, 1, 'injection', this.id, `row${i}`));
    },
  },
  {
    id: 'promptmap-rules',
    repo: 'utkusen/promptmap',
    commit: 'd305132e38f28b4cdca5c5b4586f11904ed1836d',
    licence: 'GPL-3.0 (read for evaluation only: nothing is trained on it or shipped from it)',
    evalOnly: true,
    files: [
      ['rules/distraction/distraction_basic.yaml', 'a2a6e548fc2e10f9e1eddf44c80bfbe8f13ec21da198670cc3521635e44fb32e'],
      ['rules/distraction/distraction_basic2.yaml', 'e00ea2650079d74397bf27eb0daa7b7a3345de117890db096d13bb1f97abed31'],
      [
        'rules/distraction/distraction_question.yaml',
        '03fee4256782634b96ed19ebfcc3de0abddc2d67717be76cc2ec3e528fd0ee86',
      ],
      [
        'rules/distraction/distraction_question2.yaml',
        'bf8f6f7a2ee6ebb4c2fafb5a12a9c4d3ef38bb759b8a46e545df4a98d41cda45',
      ],
      [
        'rules/distraction/distraction_translate.yaml',
        '9fa0a5a7585b73405b9231d6d920f4162592c71a3a131ae139aae2a67ae9397e',
      ],
      [
        'rules/distraction/distraction_translate2.yaml',
        'ea3038559ac77632dc5a25fd6473df73b821785817c42299084e14487bf31545',
      ],
      [
        'rules/distraction/distraction_typoglycemia.yaml',
        '5632a0fde70d77c09760246819e630d421fbfaa979e696a950f6f83e1ade8b9c',
      ],
      ['rules/jailbreak/dan1.yaml', '7e102a72a669daad5c3d2c2761ba2dba2a185fdfc8dca72a7c5ab865b1a39e79'],
      ['rules/jailbreak/dan2.yaml', '9a163ef4020090bdd6a10e1522f6a892bfc36df791d71033702c7afdc6938d2f'],
      ['rules/jailbreak/developer_mode.yaml', 'caa09017b6147ba90a3391d7e5cd332f08d34f66e5d45f1dbc692aaec6e39fe0'],
      ['rules/jailbreak/jb.yaml', '092e9f35f5134efec817de5fdc1f9ae93247295d5a281b14ac9e80bbda490420'],
      ['rules/jailbreak/jedi_mind.yaml', '5927e9dd33e22b1bf67018e8bcab55e1bc6394801e6b6ad2cae81f8ce290b314'],
      ['rules/jailbreak/latex.yaml', 'b59721bc441214d2938f262d521d772d5e7dbf31002f801fb34e0415b1eaaa99'],
      ['rules/jailbreak/moralizing_rant.yaml', '0eeb03e8220b9a1c7b1db779b185a11af5a6699086a4d0f71b4faa7fdd62246d'],
      ['rules/jailbreak/python1.yaml', '778e9cd25534fb89543c87ae8b2b26fd04e85167f2ee47c93e1d38dc2bf23d89'],
      ['rules/jailbreak/violet.yaml', '32f167ba6e6974bc4ed7a862f22a4e7adc210571e5bcd925ea6fffd5fe6d870f'],
      ['rules/jailbreak/void.yaml', 'df1307ec5721e2606aa016236db58d9389ca99def00ef6fe9d42ea78bb0238dc'],
      ['rules/prompt_stealing/prompt_stealer.yaml', '6db847d785e20b4c518eb2cd27c238be036daf6488d475378cb17029b225e784'],
      [
        'rules/prompt_stealing/prompt_stealer_basic2.yaml',
        'a76e5b6e0123cc7fca683551eef28902c433508b9b616ec23d34c7032efce8ef',
      ],
      [
        'rules/prompt_stealing/prompt_stealer_basic3.yaml',
        '88c17644886257ca384dac46aac41c42678cfcd7f31452976c1ad9ac1a6e0759',
      ],
      [
        'rules/prompt_stealing/prompt_stealer_basic4.yaml',
        'fb8a957b8857e325025ad948f7836347cd1474c858e933324b1261eb6e9f9af1',
      ],
      [
        'rules/prompt_stealing/prompt_stealer_basic5.yaml',
        '0e3d968a4a8a53f473bab8dbb7168397cecd6fc6aa229550d0471ff01c0c7849',
      ],
      [
        'rules/prompt_stealing/prompt_stealer_basic6.yaml',
        '1d01372adfcbed04f0dbc414c248f0bae85af3fbc329bbff447315788c7768c2',
      ],
      [
        'rules/prompt_stealing/prompt_stealer_basic7.yaml',
        'be264b6103a1ea55b29c634f1c32538cfb9f459d2df043896251eaf11b93e126',
      ],
      [
        'rules/prompt_stealing/prompt_stealer_basic8.yaml',
        '345b022c0723ec67fee92c60cd6527177bd74336ee0051015904dd4187c8e6fa',
      ],
      [
        'rules/prompt_stealing/prompt_stealer_china.yaml',
        '160a063316a3435cf4e2acf49fc3e160d632cb6d6753cd181c6dfc38fceb5b24',
      ],
      [
        'rules/prompt_stealing/prompt_stealer_smartgpt.yaml',
        'b2fe069a01ac0179a531c3d17849c070e10352f69b6c5c89db8fec8cf068c008',
      ],
      [
        'rules/prompt_stealing/prompt_stealer_smartgpt2.yaml',
        'd926b3e683cebfd74dc3792de08ded30b2ff13f9958d518c34d6ac692c5a5ea8',
      ],
    ].map(([path, sha256]) => ({ path, sha256 })),
    description: 'promptmap2 attack rules (jailbreak, prompt stealing, distraction): evaluation only.',
    build(read) {
      return this.files.map((f) => {
        const rule = parseYaml(read(f.path)) as { prompt: string; type: string };
        const category: Category =
          rule.type === 'jailbreak' ? 'jailbreak' : rule.type === 'prompt_stealing' ? 'extraction' : 'injection';
        return labelled(String(rule.prompt).trim(), 1, category, this.id, f.path, true);
      });
    },
  },
  {
    id: 'alpaca-eval',
    repo: 'tatsu-lab/alpaca_eval',
    commit: 'cd543a149df89434d8a54582c0151c0b945c3d20',
    licence: 'Apache-2.0 (subsets: helpful_base MIT, oasst Apache-2.0, selfinstruct Apache-2.0, koala)',
    files: [
      { path: 'example/outputs.json', sha256: '4337273753e16055c9c9a2c3c917a43de8b7a50d538f2c0a6200d21ff711eed5' },
    ],
    description:
      'AlpacaEval instructions (ordinary user requests from helpful_base, koala, oasst, self-instruct); the 80 Vicuna questions are held out and dropped.',
    build(read) {
      const d = JSON.parse(read(this.files[0].path)) as Array<{ instruction: string; dataset: string }>;
      return d
        .filter((x) => x.dataset !== 'vicuna')
        .map((x, i) => labelled(x.instruction, 0, benignCategory(x.instruction), this.id, `${x.dataset}:${i}`));
    },
  },
  {
    id: 'self-instruct-seed',
    repo: 'yizhongw/self-instruct',
    commit: '0b26ccaa415992100fa32df62d41b994cf928e23',
    licence: 'Apache-2.0',
    files: [
      { path: 'data/seed_tasks.jsonl', sha256: '7779004fa198fdf27cf70a159363879d8a26c53329e11b436af17b3941875f48' },
    ],
    description: 'Self-Instruct: the 175 human-written seed tasks, instruction plus input of the first instance.',
    build(read) {
      return read(this.files[0].path)
        .split('\n')
        .filter((l) => l.trim())
        .map((l, i) => {
          const t = JSON.parse(l) as { instruction: string; instances: Array<{ input: string }> };
          const input = t.instances[0]?.input ?? '';
          const text = input ? `${t.instruction}\n\n${input}` : t.instruction;
          return labelled(text, 0, benignCategory(text), this.id, `task${i}`);
        });
    },
  },
  {
    id: 'gsm8k',
    repo: 'openai/grade-school-math',
    commit: '3101c7d5072418e28b9008a6636bde82a006892c',
    licence: 'MIT',
    files: [
      {
        path: 'grade_school_math/data/test.jsonl',
        sha256: '3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14',
      },
    ],
    description: 'GSM8K test questions (grade-school maths word problems): 400 of 1 319, seeded sample.',
    build(read) {
      const qs = read(this.files[0].path)
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => (JSON.parse(l) as { question: string }).question);
      return sample(qs, 400, this.id).map((q, i) => labelled(q, 0, benignCategory(q), this.id, `q${i}`));
    },
  },
  {
    id: 'gpteacher-roleplay',
    repo: 'teknium1/GPTeacher',
    commit: '481075123c29854bddb82655badeef6a438f2436',
    licence: 'MIT',
    files: [
      {
        path: 'Roleplay/roleplay-simple-deduped-roleplay-instruct.json',
        sha256: 'b5d57a0d92162fd0b78988fe352e8512b435363919caf63efc3759d5a1555023',
      },
    ],
    description:
      'GPTeacher role-play instructions ("Imagine you are a detective…", "Pretend to be…"): benign role-play, all hard negatives; 1 200 of 1 923, seeded sample.',
    build(read) {
      const d = JSON.parse(read(this.files[0].path)) as Array<{ instruction: string; input: string }>;
      return sample(d, 1200, this.id).map((x, i) => {
        const text = x.input ? `${x.instruction}\n\n${x.input}` : x.instruction;
        return labelled(text, 0, 'hard_negative', this.id, `item${i}`);
      });
    },
  },
  {
    id: 'gpteacher-codegen',
    repo: 'teknium1/GPTeacher',
    commit: '481075123c29854bddb82655badeef6a438f2436',
    licence: 'MIT',
    files: [
      {
        path: 'Codegen/codegen-instruct.json',
        sha256: '8b0be81f22b86bccab30f573351b62efb3391da229d2ee817a65ce0abb08b29d',
      },
    ],
    description: 'GPTeacher code instructions (write / fix / explain code): 500, seeded sample.',
    build(read) {
      const d = JSON.parse(read(this.files[0].path)) as Array<{ instruction: string; input: string }>;
      return sample(d, 500, this.id).map((x, i) => {
        const text = x.input ? `${x.instruction}\n\n${x.input}` : x.instruction;
        return labelled(text, 0, benignCategory(text), this.id, `item${i}`);
      });
    },
  },
];

/** Generated sources fed with the public goals (after every source has been read). */
export function publicGenerated(ctx: BuildContext): LabelledText[] {
  const clean = (list: string[]) =>
    [...new Set(list.map((g) => g.trim()).filter((g) => g.length > 10))].filter((g) => !OWN_GOALS.includes(g));
  // Role-play frames take an imperative ("write a tutorial on …"); suffixes follow either form.
  const goals = clean(ctx.goals);
  const requests = clean([...ctx.goals, ...ctx.questions]);
  if (goals.length === 0) return [];
  const r = new SeededRandom(20250202);
  const out: LabelledText[] = [];
  for (const g of generateRoleplay(r, goals, 400, 'public'))
    out.push(labelled(g.text, 1, 'roleplay_attack' as Category, 'gen-roleplay-public', g.group));
  for (const g of generateSuffix(r, requests, 400, 'public'))
    out.push(labelled(g.text, 1, 'adversarial_suffix' as Category, 'gen-suffix-public', g.group));
  return out;
}
