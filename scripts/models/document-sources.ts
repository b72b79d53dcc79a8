/**
 * Long benign documents for the prompt-injection corpus: what users paste into a chat (a book
 * chapter, technical documentation, a play), cut into passages of 300 to 24 000 characters. The
 * short-prompt sources taught the model that length itself is evidence of an attack (a weather
 * sentence repeated to 7.5 KB scored 0.78; the default policy blocks at 0.71); these teach it
 * otherwise, and the eval-only ones measure it on documents it never saw.
 *
 * Each passage starts at a paragraph (seeded) and takes whole paragraphs up to a length drawn
 * log-uniformly from [MIN_CHARS, MAX_CHARS]; its group is its document (a chapter, a file), so a
 * document is in one split only.
 */
import { benignCategory, type LabelledText, labelled } from './injection-corpus.ts';
import { type PinnedFile, type Source, sample, seeded } from './injection-sources.ts';

const MIN_CHARS = 300;
const MAX_CHARS = 24_000;
/** One passage per this many characters of a document (at least one). */
const CHARS_PER_PASSAGE = 6_000;

/** Passages of one document (see the top of the file), seeded by `name`. */
export function passages(document: string, name: string): string[] {
  const paragraphs = document
    .replace(/\r\n?/g, '\n')
    .split(/\n[ \t]*\n/)
    .map((p) => p.trim())
    .filter((p) => p !== '');
  if (paragraphs.length === 0) return [];
  const r = seeded(name);
  const total = paragraphs.reduce((n, p) => n + p.length, 0);
  const out: string[] = [];
  for (let k = Math.max(1, Math.round(total / CHARS_PER_PASSAGE)); k > 0; k--) {
    const target = Math.round(MIN_CHARS * (MAX_CHARS / MIN_CHARS) ** r.next());
    let i = r.int(paragraphs.length);
    let text = paragraphs[i];
    while (text.length < target && ++i < paragraphs.length) text += `\n\n${paragraphs[i]}`;
    out.push(text.length > MAX_CHARS ? text.slice(0, MAX_CHARS) : text);
  }
  return out;
}

/** Each pinned file of `source` one document (`transform`: what of it is the document). */
function fileDocuments(source: Source, read: (path: string) => string, transform = (text: string) => text) {
  return documentExamples(
    source,
    source.files.map((f) => ({ group: f.path, text: transform(read(f.path)) })),
  );
}

function documentExamples(source: Source, documents: Array<{ group: string; text: string }>): LabelledText[] {
  return documents.flatMap((d) =>
    passages(d.text, `${source.id}:${d.group}`).map((p) =>
      labelled(p, 0, benignCategory(p), source.id, d.group, source.evalOnly ?? false),
    ),
  );
}

/** A book's chapter files, pinned: [file under src/, SHA-256]. */
const chapterFiles = (list: string[][]): PinnedFile[] => list.map(([f, sha256]) => ({ path: `src/${f}`, sha256 }));

const RUST_BOOK_FILES: PinnedFile[] = chapterFiles([
  ['ch00-00-introduction.md', '2eba711175d633b5c6bf2585bcb6382fef4eec2b39f18689a1a2b9134dd9d273'],
  ['ch01-00-getting-started.md', '152b24e7ca44a75c8b092d0c4eabce84ee82224978bf666ef627799e97f922db'],
  ['ch01-01-installation.md', '5796f74894f69e71d937ef93be972815294c6047c65038981d4d155e89d890c4'],
  ['ch01-02-hello-world.md', '645189892417cf5431fafb29c4e9b413db2c8cb07fb99e993efaf3c3e9d7a143'],
  ['ch01-03-hello-cargo.md', '61369f359b84b646fc3773eb569a26bc18ba6edb4cf2be06a84472c7054c0e39'],
  ['ch02-00-guessing-game-tutorial.md', 'bf8769bd079c4b6ae75183f6e22a6b33ed82fdac17cdec52377edae56ab291f0'],
  ['ch03-00-common-programming-concepts.md', '577cfc9c38aef8a921625806872f74d15d26e6457e3f7249665ea7afef29e014'],
  ['ch03-01-variables-and-mutability.md', 'f8e3bd09891f35846d61ec183508fcd4e88ef3450da1107cb6749eeddc815f60'],
  ['ch03-02-data-types.md', 'edd88c0a5be94e0b804d01121bab8d70f6732d75bfc988052d855e8b44920a90'],
  ['ch03-03-how-functions-work.md', 'e7e7b8a143345a7deaf64163ea8a728526fe6d6af6e42f3a5191cd682ae0f268'],
  ['ch03-04-comments.md', '82b0aac1db631041ec36dc64c6eb115c2a34e0deb062464ee0ed86203b044372'],
  ['ch03-05-control-flow.md', 'dcf589530b27653579874f189bf572600a3061712964f525a06844642a2defb6'],
  ['ch04-00-understanding-ownership.md', 'c928725db99b50317a78423e90e790868e7efa4ffb87c62062b71ad6f3b5e59f'],
  ['ch04-01-what-is-ownership.md', '873724c6862ad0cc447becf0e818eb39a324c5d4bfa26ef721286aae1941c0ba'],
  ['ch04-02-references-and-borrowing.md', '7d983eec6235630df6e85c7a5b4cfbdfc7c380c780f60774df65ba2fa1d05ca4'],
  ['ch04-03-slices.md', 'fb0ac90f3652f4096624bc008f2a5ade603ed1d7af078281cec7a88da66e82bb'],
  ['ch05-00-structs.md', 'f868f22d0149966b0d0b7191ce20318bf12981275cb0e393dbcd52caaab8b173'],
  ['ch05-01-defining-structs.md', '344424e680093f9fd0291e895cd1002c5645a769d3b928de541d78148b93caa7'],
  ['ch05-02-example-structs.md', 'bebb0dfbd5dd94bfcd19f9d2f6216fcac10a9b168eef6a07a1d753ae85512557'],
  ['ch05-03-method-syntax.md', '7c99bde44d1cb2735239a441e1898be4cfd4b21ef6862978640491903624d06a'],
  ['ch06-00-enums.md', 'efa473933293ae1d6cdca81c2efd61e9d2a602d43f4b8978b7bd145ec8e6c2c1'],
  ['ch06-01-defining-an-enum.md', 'd0958df229fd25f89f140896449ce69bbd6f40db8398a99e4a53635dba0438f2'],
  ['ch06-02-match.md', 'db9a32dfa0c24d89d74362e0bbdb9e5793a6e61fe3aa487b67897b1cb3f90899'],
  ['ch06-03-if-let.md', 'f6fcaea8b33c8a39aedc4209b7b8bb57a389ab8c64ff051a1793f0c0e025e1da'],
  [
    'ch07-00-managing-growing-projects-with-packages-crates-and-modules.md',
    'd5dcbe4f7799c942a95051d313df3b70383a1835cff1fb71510c027c4581a242',
  ],
  ['ch07-01-packages-and-crates.md', '7141297fcc8bd0d0cb4e850b9f853574ddbb15b48a8b56c615539979c8a9e27e'],
  [
    'ch07-02-defining-modules-to-control-scope-and-privacy.md',
    '9a47196bd42516d57eaa32a2813db3f89d404ef3a02f78fb465329acc9c95571',
  ],
  [
    'ch07-03-paths-for-referring-to-an-item-in-the-module-tree.md',
    'ed9bb2ccb89214a0a47050c4870105a36916c35e634ea68486e5cc669804286b',
  ],
  [
    'ch07-04-bringing-paths-into-scope-with-the-use-keyword.md',
    '0eb94c4c75fd6fc0cf8f4f13170b277888f72da4d1603a3f6094859e1de95a8f',
  ],
  [
    'ch07-05-separating-modules-into-different-files.md',
    'f71fdf4512195e4c048c6b9c89e5575fea219332099660464e1b2a279f9d5782',
  ],
  ['ch08-00-common-collections.md', '0226216f7782e55712c8c583b06280c38483c093b9b4ef501b1c95f09eb2514a'],
  ['ch08-01-vectors.md', '8ded9a736f59d44aa6dc9c9121b503db8ef1d3e2eae8db5be83c04180e3d618f'],
  ['ch08-02-strings.md', 'c69284d04088681b53c2fd05bc87219f122414aa639d9ea68f8e2d35c7b4b2c4'],
  ['ch08-03-hash-maps.md', '2588825afb8c1fa18a4ab8b4b5ba6c49976fbda23e25d304ab916576c41b63d8'],
  ['ch09-00-error-handling.md', '8c5d97ecf63d50fcb053197176dc31544d19add7df3c60e61791b95659890733'],
  ['ch09-01-unrecoverable-errors-with-panic.md', 'edce46b44eee961106ca49be8b1ce306e400c767304e9005b8763c141a444d1d'],
  ['ch09-02-recoverable-errors-with-result.md', 'dab3e88d324cdde74cf96356c58a423747a5735ac6848d8d4592dc7c13637c62'],
  ['ch09-03-to-panic-or-not-to-panic.md', 'a3f14104d56462a27c3d2b3a0cdb19eb7aaa4176ad1d80b82b0d6d667304d54e'],
  ['ch10-00-generics.md', 'd020e896ebc0b986fcddcbab0511462ebb9e4ca4b6ebdb456b2993041f2614af'],
  ['ch10-01-syntax.md', 'c88e9d9404ce16c820b4f4f84af73f40b4eb4978020dc3a1cead90ba0ac2569a'],
  ['ch10-02-traits.md', '705ae11758c687175e47104a302a9b5f694d04d683bffc28dcc61ffe9a0dc80e'],
  ['ch10-03-lifetime-syntax.md', '8660fe043e6ca70645f6734f357dc61224ecd4e3454ebde7b696f89d6a0d6e91'],
  ['ch11-00-testing.md', 'c65a2080c43a9f3d83a351779e059c6203b2c48285835c9fd277f7465fbd5192'],
  ['ch11-01-writing-tests.md', '03cec10df505d25d37717447f906d392506c18f4af1ba7ef9cc32f05cfc15359'],
  ['ch11-02-running-tests.md', '4c2cbb5c746e0c91c91d40b178025135bf126175c957110f0fa4368613388960'],
  ['ch11-03-test-organization.md', 'b6131ddfce33ee37534fde3116a1bc7dd191747a645e2a0272faf7c18a9f8942'],
  ['ch12-00-an-io-project.md', '0558d29b101abf718e8944d8ac3687282579dbdc1e3626c3eb2c18f9badf1495'],
  ['ch12-01-accepting-command-line-arguments.md', '79feeecffe1076f3555c8459e5bec4db9b257a0d7f471bb55fd7a2cfa3414dfc'],
  ['ch12-02-reading-a-file.md', '43a390d84480ff0f5ae94b422cc07a131b97784d6a0b9943f8401a235090b39c'],
  [
    'ch12-03-improving-error-handling-and-modularity.md',
    '51b686ec16b974ffef5494fbaaaf84342322f080cfe28764df78f682f13c6a9f',
  ],
  ['ch12-04-testing-the-librarys-functionality.md', '82cdffa0023c7c3a3a8a8f5658cf305e09f123c1e5b08713d1a19ebda80a3582'],
  ['ch12-05-working-with-environment-variables.md', '83185725d64339fa71448b45152abf9cc2c5efb33db6aacda25de9d5b7b456b5'],
  [
    'ch12-06-writing-to-stderr-instead-of-stdout.md',
    'f61a0dce702794c35688c89b09a7b5db6b91769a3d65ce1b53d45d84b2202ffb',
  ],
  ['ch13-00-functional-features.md', '13f319cc2e816545bbad17d38aa661748680f83ae67c2775fce05ee43ef541be'],
  ['ch13-01-closures.md', 'a20cbb0b6af2a985486d9ec88f5be83dac27fd45893983bfe600a08c5faf7b6e'],
  ['ch13-02-iterators.md', '0c547a5ab78fc6692bb36c2cc183d2dd1ac140a979537acb49f59c6c509ac01e'],
  ['ch13-03-improving-our-io-project.md', '0ba736d1914be507b6ab06bdd64ede35dc4d5ce57836b09c87dd84c177681cc9'],
  ['ch13-04-performance.md', '200b43a32e2bef5de723b6211bb0e6b6ca01461093ccb5c277bad1954bad0de0'],
  ['ch14-00-more-about-cargo.md', 'b65b3d97000dff979a58e111dcdab150284674c21b73d16a7d0745578be243fd'],
  ['ch14-01-release-profiles.md', '89c703f79284a38445f136feede175a251d0161b1c0efb3d49aa84344af04bf0'],
  ['ch14-02-publishing-to-crates-io.md', 'dc30b41f9c5d8c5ae3ff2e13d193a7466709483e90ca8d4939b663e39c450a79'],
  ['ch14-03-cargo-workspaces.md', '309df855d8cc7aeb6481ec604b2043992db9de371f4b0fb34fd52412cce72fcd'],
  ['ch14-04-installing-binaries.md', '5e9d6e61baa315b97a51080bd2dd96acd69690c280e6cb9bc13b4e6b6af82b15'],
  ['ch14-05-extending-cargo.md', '1a18d238852672a56de0b521226c4a6ef21946f0a3d6bec7f0ffb11794a4232e'],
  ['ch15-00-smart-pointers.md', 'adf324198a3eb791ba5828cee69a201f3f2e6f8493280bfb5c897e8b50fca0f1'],
  ['ch15-01-box.md', '67822be0c96dcae16057dadf4cb17d685586a8165f42134871c3e0590b5adf09'],
  ['ch15-02-deref.md', '36001d087e5aeabe658ce2689fe7c286c774fc74045841d62f6cf01108d0980e'],
  ['ch15-03-drop.md', 'b7be9004339b812131797124d5afc0658b35197e21de39d39ba7af814ad7488c'],
  ['ch15-04-rc.md', '3ef419d9f6d39ad665238bd0ead40f7ad65485e8762a8f8f64dd13d7152e5868'],
  ['ch15-05-interior-mutability.md', '44b89630fd7ba91ef3916854e849623118219d900adb94ad1e13a870a3dba8ed'],
  ['ch15-06-reference-cycles.md', '63e59efb318ea3cf88df11b3f87528bd221abfd25174f8a0388a445c41018e71'],
  ['ch16-00-concurrency.md', '0101c582d4410d0136c4ef46195c3fa382438dc1a667cbe5d754605e2aa89fb2'],
  ['ch16-01-threads.md', '84d2e46991bce433f8d50c29479e36fd0c7f62e735758c8a096ab4e1ebe58fe7'],
  ['ch16-02-message-passing.md', '883ed745d87151fa820cd337420a24f59cf8391d4ce87d2ee22af3bd278e05d1'],
  ['ch16-03-shared-state.md', '9aa8adf23ccf6ceaf7586b9aac35c30769bd13ebfbb8950a185d9b136104f10b'],
  [
    'ch16-04-extensible-concurrency-sync-and-send.md',
    '0f8675202aba9f931af209bb9a4cce659af4686719ba54e9c9904ac6fd8264f4',
  ],
  ['ch17-00-async-await.md', 'f9cd7f4b2e03b4be88231c9dd2d6d0e10a4b770dc4f3033cf3e33a6e6a69550e'],
  ['ch17-01-futures-and-syntax.md', 'dff0af8b0374b505748ded80c3f7656742a8d3a219a6e276ce69478e82f06633'],
  ['ch17-02-concurrency-with-async.md', 'c839d2eb1a7051a3719a948f4aa972577bd6e3def82e08c6d903931dcb29cad5'],
  ['ch17-03-more-futures.md', 'f9ab52571b5926c51076018f6b0657f75e6b14d40afac769bf79f883ec12ec4d'],
  ['ch17-04-streams.md', 'b494f9019a1e9a79992db4c056377995227764d2822bb8cd0f86d51ce4a08655'],
  ['ch17-05-traits-for-async.md', 'be42c58afa827ff8212031e08903faa4a1730116331d86b72d3d73b2ebe80ec8'],
  ['ch17-06-futures-tasks-threads.md', '1d6018f020d01dc2f9d460765e995e587025029ef66c41a64b98dd61926b74cd'],
  ['ch18-00-oop.md', '422a0ab9c4e755eb30c3b057632d51cd76ee3b4983239bc215ae65e9a2d850c7'],
  ['ch18-01-what-is-oo.md', '09efdf84fb2fd7197a221e8bdd8df24fb7b0a25468b2c84a01a9d71e537f6526'],
  ['ch18-02-trait-objects.md', 'be159095c388554e8bdd41791f73f86cb4ecad440ee78f6226bbf556bff865ba'],
  ['ch18-03-oo-design-patterns.md', '2f87e2bda9a748c973642b0c7f9ded2ac0467059a708aecabe7bd11e08eb305a'],
  ['ch19-00-patterns.md', '6fcb23c2cc53ff1a4ea10ae3ba914a75678fa6b3cfc56645b22b1893b4fabb6d'],
  ['ch19-01-all-the-places-for-patterns.md', '6d7fcf955b94ce6424d13e912688b6ba4536fb9c2cb7c5d08b8384f44d090921'],
  ['ch19-02-refutability.md', '815644eaa08948e0adb23fe62c64d1359cd1f6eddbb923af294f7028f5b9e5e2'],
  ['ch19-03-pattern-syntax.md', 'cc8b098538391d5e5f28e66c126209262e9aaf55d12f99056950be043d748679'],
  ['ch20-00-advanced-features.md', 'dc250ffa5f82d92ee01e7a6bf46ac6fb7b1f71f0ae368bbb5fe88d71b1f6e5e5'],
  ['ch20-01-unsafe-rust.md', '5d91b909eec72d9a9438ed2f9d6db65cfa1243e607109d4f152e0be8e2295d7b'],
  ['ch20-02-advanced-traits.md', 'f544ee583a8c59cfaad510536590be8723547c299c39b44a7bad22b7eb1acdea'],
  ['ch20-03-advanced-types.md', '640f8f52f31cf573a6a1f64dbbdebfe7f36f54a3f42a8cf22c42e7658e75960e'],
  ['ch20-04-advanced-functions-and-closures.md', 'cfbbca957a9a1657c75e2d61a511643b06ffffbbb57da101ab2da6eccca97bf4'],
  ['ch20-05-macros.md', '403fb3429c4c11ef118a31477aae7ce73cfcc0a2776289faac1a797c7f57f173'],
  ['ch21-00-final-project-a-web-server.md', '2a0e9ef98893b80390e0c428b109ad90bc200852c6bc0151144bcdf6843f2abd'],
  ['ch21-01-single-threaded.md', '899122a94a52c45f4c934e1967460a36c7803fcc1b6a933b790e610a9376f04f'],
  ['ch21-02-multithreaded.md', 'ea94b0a16b87464290058c5c650d4e859d3d5d796af955742068a915ee97cd14'],
  ['ch21-03-graceful-shutdown-and-cleanup.md', 'e4c2abaaa676697bc84f66443a4f10ee3ebd19f305e5edcda888e5872ab7ff92'],
]);

/** Every other chapter file of the Chinese and Japanese translations (to keep the lists short). */
const RUST_BOOK_ZH_FILES: PinnedFile[] = chapterFiles([
  ['ch00-00-introduction.md', '30a768c545096f5565e754da6d2d4cd0a798d063ef7b4de92306e42a39fd20bb'],
  ['ch01-01-installation.md', 'c488856a03d6e709f0c727f8e8d4cc90eeb21b004a97aea33f1e4513427035f3'],
  ['ch01-03-hello-cargo.md', '10cb2482cbbcd5cd5f2f65a8aafd518837a820cb00d4e1b75bc3f28c0db9b36b'],
  ['ch03-00-common-programming-concepts.md', '70e85d3fac7471e648bf804d5817473268792fbbe9dadd6e5607172055de52d5'],
  ['ch03-02-data-types.md', '46d76b5b6144eda11943294b1e747a78f0316cb9964cdf349d36b52e56083ab4'],
  ['ch03-04-comments.md', '1eb4553516180e378e2c2e7addeae982b8542093ac41c586e9a11dd4327aa018'],
  ['ch04-00-understanding-ownership.md', '797f9c92744be3434f9ad3dcd6360ba1134dc1c9a70f643ef56f00acb319c96a'],
  ['ch04-02-references-and-borrowing.md', '36988bf1c0ea055b3245b6ac5a56c49ba614a1d754538020f577000259b8f8c3'],
  ['ch05-00-structs.md', '718f12547e107ea58c6d79a2936ac50ac8922b19c67eb0cd3da8d38e3cd75bb2'],
  ['ch05-02-example-structs.md', '6e42fd6a0fe0bf930a2ee6caf703b78921a470857e1421d304703e455039cc07'],
  ['ch06-00-enums.md', '9514f1ac92b7cbc34442ecdb24100473b61e08db5ab4a2c78b364d967006f44b'],
  ['ch06-02-match.md', '31a0644f26d9550229e4683b7ea8ae40a0ff21c64bf518565a4ca2fb5f4c13e3'],
  [
    'ch07-00-managing-growing-projects-with-packages-crates-and-modules.md',
    '14ede8cb4c75b61a9904d1c6ac8bb8017cc2b5cd3444e75e19a68915a52f1bc1',
  ],
  [
    'ch07-02-defining-modules-to-control-scope-and-privacy.md',
    'e3e49628c2616845d0ecf1971e5954eeb407b1565e131555d9c28cf231b03f23',
  ],
  [
    'ch07-04-bringing-paths-into-scope-with-the-use-keyword.md',
    'ab6dc65ce7213009779b2b3a26b859b98b9b99de4e9ec7842219c1a36f206de2',
  ],
  ['ch08-00-common-collections.md', '5fdb63c15144b70907e5f307a0b02e922bd3ad6d9759ffae4dd9ab6fcd0133e8'],
  ['ch08-02-strings.md', '85395b8a4cf5593bebf7148f2ddfa33be01bf7feb01b51b9f377e2da9d7af7a0'],
  ['ch09-00-error-handling.md', '8bae586873765810aa4365ed7364d31f2030ff25a5fda323a1fc55e994a67343'],
  ['ch09-02-recoverable-errors-with-result.md', '13f519b77ac00948f40e15d4b5fc0027b678da372ee77a771c864b242777c4a3'],
  ['ch10-00-generics.md', 'd9e9d249d0661880463226ad4a398440998feecdc466ca5d534194550228f371'],
  ['ch10-02-traits.md', '0d27e2b55f70a37617e1f65753519c2de43123c1faf4425109124d6afd577800'],
  ['ch11-00-testing.md', '7a85d7ce5d88d8a49e6b331fba8503ae54cc0aff844d40cbc8af407b92368805'],
  ['ch11-02-running-tests.md', '2c2c42fa5b7962cf416395874af6a0551c5dbb33a48a6749612794237f4b07a9'],
  ['ch12-00-an-io-project.md', '60e046a82324ad65b65723d5251d5164cd89e622b7a2c6ea8c4dc2101409be49'],
  ['ch12-02-reading-a-file.md', '63f1a604cd698126698448fda2febcabe49dd9d16dadaa973687e3ad763cb8b9'],
  ['ch12-04-testing-the-librarys-functionality.md', 'd2549894a02c7293fd18f0a4c7e6d4e4458ac903dc8e074d4efb45deb3294b69'],
  [
    'ch12-06-writing-to-stderr-instead-of-stdout.md',
    '4f81ebf1a9f5e9766a036464218abbfb7918d059c7cee01795ee0e60b56a0c81',
  ],
  ['ch13-01-closures.md', 'd52fed3f180f7b7a4ab0bda7cace54e7a37d96932d129f3786a4d742da7f4b74'],
  ['ch13-03-improving-our-io-project.md', '8ec42e3c21be97675db7b3088396ff15923b864980caf3d97da92be4b13e4a71'],
  ['ch14-00-more-about-cargo.md', '77bd186943d638de0ff148875f83cb4908fe08009d56720c0f46247cca1f1f3f'],
  ['ch14-02-publishing-to-crates-io.md', 'fa1663856152eb2e856b9d172cc7bc72bb703c8db99d4a66e29e1117c408b0d2'],
  ['ch14-04-installing-binaries.md', '75669dc3379e679119ac48e13f35e49f1ed0ac35b70ac7642b3212cfa65960a6'],
  ['ch15-00-smart-pointers.md', '939d1065b88fe68181d10f587b9397122d76c9629e15c0e1c068888b09d69f10'],
  ['ch15-02-deref.md', 'f48c88b64fa366239a09371d916731ba73f59faf387637d2ae1341cd032cfa13'],
  ['ch15-04-rc.md', 'ce9302e94c2565589d9ee1cdccfcf4ff750576b6b4bb1220ca51fe9fac87d4fb'],
  ['ch15-06-reference-cycles.md', 'e4272597434cdb0b8ee223050df03111db66322e7aded9dd08f6670fc2220c61'],
  ['ch16-01-threads.md', 'f0ebc5270ee7d27315cb25b47a36da686703126ebf04f74e56bf94e83d1969d2'],
  ['ch16-03-shared-state.md', 'f6734e8f6b1cb90250561acd6149550f408b65f54532d0d61a1b2d7466792ac7'],
  ['ch17-00-async-await.md', '736bde80b4e608218233b5c72a00ba9a85f4db953d9df93f08839af6fc9c13f3'],
  ['ch17-02-concurrency-with-async.md', '1170b78fc472dcbf9319cc49f0e68cf793f0ab9fb425a2046a6b67f8ba09dec2'],
  ['ch17-04-streams.md', 'da6af54d62c1a82f9178ee8e868782f40b61ea90cec6e988fc8e7ba6da11c39d'],
  ['ch17-06-futures-tasks-threads.md', 'ade9aeaa0235c350535e865d15c26b711ffcb2d7bfede4d12a6e2ef0b381c48c'],
  ['ch18-01-what-is-oo.md', 'f49f024bf7abd25d39c27431d0ac78e42df9e1d04ae9f5764a0e87c76f285193'],
  ['ch18-03-oo-design-patterns.md', '304b92a53c5ee971273c52178ff151873b89d82454800cdae6515e466b052c3a'],
  ['ch19-01-all-the-places-for-patterns.md', '5565e85d5dda0055ca8e255b08b4874992fe5634015ec4b1c9b7f5b0e06f323a'],
  ['ch19-03-pattern-syntax.md', 'a85fba37ad227200dcd920f60eb82e8bdc94c17742c7d9f022a3d1368005a355'],
  ['ch20-01-unsafe-rust.md', 'bc5b75adc6259e79a3f57e5e1aa4d7001b4fe6eb1ba23c958eb6d1bfc03d6f49'],
  ['ch20-03-advanced-types.md', '020e4bbbc0a9528f75a56c585f92a2b63715d3a430e1e768d20639d2b1551727'],
  ['ch20-05-macros.md', 'e29e0bf2d1aef3895e0eb1dc010e3a686f6ea9b88f5c15a94fcb2db22dff3cd4'],
  ['ch21-01-single-threaded.md', 'eb098bc90f8254508ea704d8b0178a112ee11d74cf5567036ecbb9df7283fe45'],
  ['ch21-03-graceful-shutdown-and-cleanup.md', 'f7c0b52cd3cbed6ae820141027342232a1d2f66f2604b9bd41151da8b2bf2f8e'],
]);
const RUST_BOOK_JA_FILES: PinnedFile[] = chapterFiles([
  ['ch00-00-introduction.md', '6cd895a45df74c3bc4722711d9480e43bf23b9fe29f17b846256707a0b705ba1'],
  ['ch01-01-installation.md', 'cabaf7dc79306a5f472ca813399184620cb1a08a40f8afafe6e7f2e41253b1de'],
  ['ch01-03-hello-cargo.md', '0450f7942f9e2d4b801d4acc0bea261bd4983b2fd2041254ae579f995ad518ac'],
  ['ch03-00-common-programming-concepts.md', '37861afe3de47fba42244a3bc337ac15280c1161cf23ea4abf323467c95d6716'],
  ['ch03-02-data-types.md', 'ac7a335bd6db70d542f4cb008ba97a910c42f0b33826e4641200dfbf886cbe0b'],
  ['ch03-04-comments.md', '9a284d937a34cb021f1dc33f1775d77d1622983fc41962447ace6cd907489cfa'],
  ['ch04-00-understanding-ownership.md', '81043c5d548e70a3773df5ec8bb6d5e6763c7a1406451ca015f95bf725f21591'],
  ['ch04-02-references-and-borrowing.md', '4645fc239dc236dd24cd38d13e2d1a721315436cedc767c296da6016b816db81'],
  ['ch05-00-structs.md', 'b81c0549757f881af6c4690a4a29ac16b5f35377e52e7b7b663819eb3928d8a8'],
  ['ch05-02-example-structs.md', '121bc79d0cea38ca0a363ebc358cad3cb5780de25ac9c90fe619ef9924abb875'],
  ['ch06-00-enums.md', '66797594c8becdec1ee39044b3612b453229959db345ac915d36e77b3df299ac'],
  ['ch06-02-match.md', '25c77fc3b4d8aea1f2718176aa97e9b463d602e45e62d073385860353f0bb4ff'],
  [
    'ch07-00-managing-growing-projects-with-packages-crates-and-modules.md',
    'ffa7545623ae11169b6af953706dc6f93357e52c466ee249512e3c3b2be8b0d9',
  ],
  [
    'ch07-02-defining-modules-to-control-scope-and-privacy.md',
    '5d50bd63203ce92a87323f6751e5547b926a66a151582b04348f5fa6e66e9998',
  ],
  [
    'ch07-04-bringing-paths-into-scope-with-the-use-keyword.md',
    '00d721c585f8004e7110883f1f95c036e856e36f088c6806106577d08dc6c3a9',
  ],
  ['ch08-00-common-collections.md', '298b92e5aa9b9954fc9473e16fb9ef5769de6ecc0950f02c3cdfec62ef3b1802'],
  ['ch08-02-strings.md', 'de3b250f71bc67913e1eda127900e464308162f85266a8341398ba6f99aa4e74'],
  ['ch09-00-error-handling.md', '1c1b1662e3a1c6b7755b88f42f5ce821843b7c445cd0f93806863b0f7fb82db4'],
  ['ch09-02-recoverable-errors-with-result.md', 'f24eba9870b5cb7939f7316c5dad34f9f14b09a2aea8ceab10547d71f8c3ef7d'],
  ['ch10-00-generics.md', '6b61d443b87ffc780f9e7c74bb1919e9cb1bdf33e0b8af9daf83277064a5088c'],
  ['ch10-02-traits.md', '41ff41df66c5fd9f18bc7de8e17ae70809a9fc7dc661a0cd8a98b57614596977'],
  ['ch11-00-testing.md', 'ac97e494f26e502c6f94a68548512ce3a28365f6bd1efd29ba0812f1e7ab9292'],
  ['ch11-02-running-tests.md', '6c0299afddeaf211e9f0bacfb91188cd23ae171d714244bae0060663ba78adba'],
  ['ch12-00-an-io-project.md', '19e94455b3e12d351c2a80b9baaf7b5e85419d288dcf4476f56a27b9af73c3c9'],
  ['ch12-02-reading-a-file.md', '7222b67df69440e526e022e1f6ef225e55861f7c7a29ebf3e22af8402bf8b02a'],
  ['ch12-04-testing-the-librarys-functionality.md', '4a408e41d45f8ad78fda338a163f1a4d68a0a015d87ce2c4533a751ac91f6cfe'],
  [
    'ch12-06-writing-to-stderr-instead-of-stdout.md',
    'b10168724657a6edda0589243390ae138c423a3aab8ecbe8b26c82e2180f2503',
  ],
  ['ch13-01-closures.md', 'f1d327c0695dfc078577601decd90e7b6e13a9c8b28d191ab4df3b8ea17291cc'],
  ['ch13-03-improving-our-io-project.md', '343b9f8b077642ebc04a533e35d64ed5d27c999afec35530ae22e8a41a2de52a'],
  ['ch14-00-more-about-cargo.md', '0078ef1bab052d6c788388e292b8312870db07e4677d9dc77b02543a6d53be8e'],
  ['ch14-02-publishing-to-crates-io.md', '52a8a33943b2b37a2fecc4696af2ecdfed5d78ab6554613f3c359a7a9065f43c'],
  ['ch14-04-installing-binaries.md', '5f435dfbdf131a540d49b83261f400cc1b3d0e33b804819f60438fc96beee1fe'],
  ['ch15-00-smart-pointers.md', '53865b239074db75e824edc07b1528c5aed66ca512804779fa984c59a5bdd772'],
  ['ch15-02-deref.md', '84b7c2327099e6a93de59bbc67639c4eff5825c156f7c116d63c6d63ee3dfe84'],
  ['ch15-04-rc.md', '23e1d3adcb60dcc1204717231c604e1d414a3d191bf2408cf32b47f56f2c617e'],
  ['ch15-06-reference-cycles.md', '619c36c26478e2d8e47d2f618f20cd450d79651696e6965fda0af79790a1a87d'],
  ['ch16-01-threads.md', '57a45b79c1b67ca9e703243a0d764eafb045c75cb82d2120cff5c741c9285b8c'],
  ['ch16-03-shared-state.md', 'fcf00e269f3de438122269e2b003a6872a1b821252d098efa1d78a07fbed44e6'],
  ['ch17-00-oop.md', '124f0945a0ba5e4a36b5984739317dc04077ac6f3e5bd9ae0e24f64f9f6981fa'],
  ['ch17-02-trait-objects.md', 'cce41ca6bb0db5af73afca176bb93266f80224dbabf3c15179856c907869e02d'],
  ['ch18-00-patterns.md', '705917ac27005066b59bea5fcea24859ed0c9c10b7aa16cb23bfac17df0db322'],
  ['ch18-02-refutability.md', '436e6060893c3300d387bf935dbd2f74f90b33ad4aa7d1c854c991efb53110b2'],
  ['ch19-00-advanced-features.md', '4f58016b4c52f936df1766fdd5b7bb0d9843e8f5d265b765f992dc78c8fed235'],
  ['ch19-03-advanced-traits.md', '1cde6b40ef998e6214896f3ba3656f594026ebf88e84c3a866ec13c586fe10b2'],
  ['ch19-05-advanced-functions-and-closures.md', 'a8212a7ca7ed624e27649f3f976f232e2284f9b936526d6acf0faed97c90c42e'],
  ['ch20-00-final-project-a-web-server.md', '7f64460dcb12d1ecaf9b6452a7d24d6f6317c825ea21ec3364b85c79120b74c6'],
  ['ch20-02-multithreaded.md', 'a84d2e8091a7074f5c4abab90e4872b0914be49b32a63324af58323683d9505e'],
]);

interface XquadFile {
  data: Array<{ title: string; paragraphs: Array<{ context: string; qas: Array<{ question: string }> }> }>;
}

/** XQuAD's articles, each with its paragraphs' questions and passages, in every language. */
function xquadItems(source: Source, read: (path: string) => string) {
  return source.files.flatMap((f) => {
    const d = JSON.parse(read(f.path)) as XquadFile;
    return d.data.flatMap((article) =>
      article.paragraphs.map((p, i) => ({ lang: f.path.slice(6, 8), group: article.title, at: i, ...p })),
    );
  });
}

const XQUAD = {
  repo: 'google-deepmind/xquad',
  commit: '7d30520c717524000f0d9d2f9c10a069acd9d285',
  licence: 'CC BY-SA 4.0',
  files: [
    ['ar', 'abdabd7afed5c635d99cca0f3f0d0c9d9ed0bc77451e963c2e4e0638c29e486d'],
    ['de', '990b5d746746ed65ed4702ea5f35f99ffa4e2f1c390c07d003642acd937916f9'],
    ['el', '821cf0f88e73fa258fd2f548b19b6ec39f7025059e16f6f9fc8cd797c9c3663e'],
    ['en', 'e4c57d1c9143aaa1c5d265ba5987a65f4e69528d2a98f29d6e75019b10344f29'],
    ['es', 'dcbae93ec3a9f4b9e78fd834a171d6f96c1a875e10e15b7530b7e4ef4971e37e'],
    ['hi', 'df2cce3532b37e9beb8979704b5c9a4bf874358f105395a298b89427b43b9d24'],
    ['ro', '94f8d54e93ad2b7dd2e76dd921a666b5b8eff2d4379df9f179c42b445f09643f'],
    ['ru', '208d5b1aa154c52b1b5c5eda16281e455e8fd198cdb9af3f469f0d6037d973bf'],
    ['th', '5cdda11d0e1e075f7872abf4e6ae830388ce7f617964d542308e9ae4257e0f43'],
    ['tr', '92179a564774b7696100d144c1e10870d0a966b6fccbdd254a65b9d2ab1971cc'],
    ['vi', 'f619a1eb11fb42d3ab0834259e488a65f585447ef6154437bfb7199d85161a04'],
    ['zh', '691d0b3359bc6b8faa8de931dfdfe21d50a65861ae348e32a0d1a0190b0c8835'],
  ].map(([lang, sha256]) => ({ path: `xquad.${lang}.json`, sha256 })),
};

export const DOCUMENT_SOURCES: Source[] = [
  {
    id: 'doc-rust-book',
    repo: 'rust-lang/book',
    commit: '917544888a55e4da7109bdba8c88c893c0da70f4',
    licence: 'MIT OR Apache-2.0',
    files: RUST_BOOK_FILES,
    description:
      'The Rust Programming Language, its chapters (Markdown: prose, code, listings): passages, one document per file.',
    build(read) {
      return fileDocuments(this, read);
    },
  },
  {
    id: 'doc-pride-and-prejudice',
    repo: 'GITenberg/Pride-and-Prejudice_1342',
    commit: '81db45c9c48c592f0b77f01fc59e677ad0a5634e',
    licence: 'public domain (Project Gutenberg eBook #1342; its licence text is not read)',
    files: [{ path: '1342-0.txt', sha256: '48e0522844402a86a3ea98f0947ba85ea54838db3c59022299298ed968a5a163' }],
    description: 'Jane Austen, Pride and Prejudice (novel prose and dialogue): passages, one document per chapter.',
    build(read) {
      const text = read(this.files[0].path).replace(/^\uFEFF/, '');
      const start = text.indexOf('\nChapter 1');
      const end = text.indexOf('*** END OF');
      if (start < 0 || end < start) throw new Error(`${this.id}: the book's chapters were not found`);
      const chapters = text
        .slice(start, end)
        .split(/\nChapter \d+\s*\n/)
        .filter((c) => c.trim() !== '');
      return documentExamples(
        this,
        chapters.map((c, i) => ({ group: `chapter${i + 1}`, text: c })),
      );
    },
  },
  {
    id: 'doc-rust-book-zh',
    repo: 'KaiserY/trpl-zh-cn',
    commit: '49df980589ccd5c1b8829b9be47439136dc34101',
    licence: 'MIT',
    files: RUST_BOOK_ZH_FILES,
    description: 'The Rust book in Chinese (every other chapter file): passages, one document per file.',
    build(read) {
      return fileDocuments(this, read);
    },
  },
  {
    id: 'doc-rust-book-ja',
    repo: 'rust-lang-ja/book-ja',
    commit: '822ffbb7b5ecf28ff5393e4057c8b9189a5d3fe1',
    licence: 'MIT OR Apache-2.0',
    files: RUST_BOOK_JA_FILES,
    description:
      'The Rust book in Japanese (every other chapter file; the English original it keeps in HTML comments is dropped): passages, one document per file.',
    build(read) {
      return fileDocuments(this, read, (text) => text.replace(/<!--[\s\S]*?-->/g, ''));
    },
  },
  {
    id: 'xquad-questions',
    ...XQUAD,
    description:
      'XQuAD questions (Wikipedia reading comprehension, 12 languages: ar de el en es hi ro ru th tr vi zh): benign prompts in other scripts, 720 of 14 280 (seeded); grouped by article, so an article is in one split in every language.',
    build(read) {
      const questions = xquadItems(this, read).flatMap((p) =>
        p.qas.map((q, k) => ({ text: q.question, group: p.group, id: `${p.lang}:${p.group}:${p.at}:${k}` })),
      );
      return sample(questions, 720, this.id).map((q) => labelled(q.text, 0, benignCategory(q.text), this.id, q.group));
    },
  },
  {
    id: 'xquad-passages',
    ...XQUAD,
    description:
      'XQuAD paragraphs with one of their questions after them (a user pasting a text and asking about it), 12 languages: 360 of 2 880 (seeded), grouped by article.',
    build(read) {
      const items = xquadItems(this, read).map((p) => ({
        text: `${p.context}\n\n${p.qas[0].question}`,
        group: p.group,
      }));
      return sample(items, 360, this.id).map((p) => labelled(p.text, 0, benignCategory(p.text), this.id, p.group));
    },
  },
  {
    id: 'doc-system-design-primer',
    repo: 'donnemartin/system-design-primer',
    commit: 'ae9bbd7b02d90b9866215de185217d33f39ab733',
    licence: 'CC BY 4.0',
    evalOnly: true,
    files: [
      ['README.md', '390a8cad315d703c10cfbdf6832c2f320882bd4c3feaf2cea78c820995903cf1'],
      ['README-ja.md', '6d6a4c7e9575e92347fc8a43ed1dba4cc55dcd9da7c310fe821a9175ff3ec97b'],
      ['README-zh-Hans.md', '8a58512b70b6c8680cea860bcfe15c3b92d2814e5f0004781a3b17b7ff078760'],
      ['README-zh-TW.md', '3713adfbfa40ce49688ddc32a7834d92a7ab44af522654e12f02e6484eccaf57'],
    ].map(([path, sha256]) => ({ path, sha256 })),
    description:
      'The System Design Primer (technical Markdown with links, tables and diagrams; English, Japanese, Chinese): passages, evaluation only.',
    build(read) {
      return fileDocuments(this, read);
    },
  },
  {
    id: 'doc-tinyshakespeare',
    repo: 'karpathy/char-rnn',
    commit: '6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e',
    licence: 'public domain (Shakespeare; collected in char-rnn, MIT)',
    evalOnly: true,
    files: [
      {
        path: 'data/tinyshakespeare/input.txt',
        sha256: '86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed',
      },
    ],
    description: 'Tiny Shakespeare (plays: speaker names, verse, dialogue): passages, evaluation only.',
    build(read) {
      return documentExamples(this, [{ group: 'plays', text: read(this.files[0].path) }]);
    },
  },
];
